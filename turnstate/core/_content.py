"""A user message's content as a whole: the checks made before a turn takes its chat.

``content_problem`` checks each part's shape (``_media.part_problem``), naming the part
by its index; ``inline_problem`` bounds the inline bytes of one turn;
``capability_problem`` refuses a part type the model does not take
(``ModelInfo.inputs``). Each returns ``(field, problem)`` for ``InvalidInput``, or None.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from turnstate.core._capabilities import FILE_URL_REFUSED, MEDIA_LIMITS
from turnstate.core._conversation import Part, TextPart, UserPart
from turnstate.core._errors import InvalidInput
from turnstate.core._generation import unknown_model_hint
from turnstate.core._media import (
    FilePart,
    ImagePart,
    inline_bytes,
    is_data_url,
    kind_of,
    omitted_text,
    part_problem,
    split_data_url,
)
from turnstate.core._registry import ModelInfo
from turnstate.core._text import surrogate_problem

DEFAULT_MAX_INLINE_BYTES = 20 << 20
"""Inline image and file bytes one turn may carry (20 MiB, as Gemini's and OpenAI's
request limits; ``TurnLimits.max_inline_bytes``)."""


class _NotGiven(str):
    """The default of ``TurnInput.user_text``, told apart from an explicit ``""``."""

    __slots__ = ()


NOT_GIVEN: str = _NotGiven()


def shorthand_problem(content: Sequence[object], user_text: str | None) -> tuple[str, str] | None:
    """Exactly one of ``TurnInput.user_text`` (None: not given) and ``content``; both
    only as ``attrs.evolve`` gives them (the text is the content's own)."""
    if user_text is None and not content:
        return "content", "give either user_text or content (neither was given)"
    if user_text is not None and content and user_text != content_text(content):
        return "content", ("give either user_text or content, not both (put the text in a "
                           "TextPart of content)")
    return None


def inline_data_urls(content: tuple[UserPart, ...]) -> tuple[UserPart, ...]:
    """``content`` with each image or file given by a ``data:`` URL turned into the inline
    bytes it carries (``data`` and ``media_type``; the URL's type fills a part's missing
    one), so every check of inline bytes applies to it and every wire sends it in its
    inline form. A part that also has ``data`` is left to ``content_problem``.

    Raises:
        InvalidInput: a data: URL that cannot be read (``content[1].url``) or whose type
            is not the part's ``media_type`` (``content[1].media_type``).
    """
    if not any(isinstance(p, ImagePart | FilePart) and is_data_url(p.url) for p in content):
        return content
    return tuple(_inlined(part, f"content[{index}]")
                 if isinstance(part, ImagePart | FilePart) and is_data_url(part.url)
                 and part.data is None else part for index, part in enumerate(content))


def _inlined(part: ImagePart | FilePart, where: str) -> ImagePart | FilePart:
    split = split_data_url(str(part.url))
    if isinstance(split, str):
        raise InvalidInput(where + ".url", split)
    url_type, data = split
    if isinstance(part, FilePart):  # its media_type is PDF unless given: the URL's says
        return attrs.evolve(part, url=None, data=data, media_type=url_type or part.media_type)
    if part.media_type is not None and url_type not in (None, part.media_type):
        raise InvalidInput(where + ".media_type",
                           f"is {part.media_type!r} but the data: URL says {url_type!r}")
    return attrs.evolve(part, url=None, data=data, media_type=part.media_type or url_type)


def content_problem(content: Sequence[object]) -> tuple[str, str] | None:
    """The first part of ``content`` that is not a usable ``UserPart``, or None."""
    for index, part in enumerate(content):
        where = f"content[{index}]"
        if isinstance(part, TextPart):
            wrong = _text_problem(part.text)
            if wrong is not None:
                return f"{where}.text", wrong
            if part.phase is not None:  # stored with the message, never sent: a user
                return f"{where}.phase", (  # message's text has none
                    f"is OpenAI's assistant-message phase; a user part has none, got "
                    f"{part.phase!r}")
            if part.citations:  # a provider's, on an answer's text
                return f"{where}.citations", "are an answer's sources; a user part has none"
            continue
        if not isinstance(part, ImagePart | FilePart):
            return where, (f"{type(part).__name__} is not a user part (TextPart, ImagePart "
                           "or FilePart)")
        problem = part_problem(part)
        if problem is not None:
            return f"{where}.{problem[0]}", problem[1]
    return None


def _text_problem(text: object) -> str | None:
    """Why a text part's ``text`` is not text UTF-8 can encode, or None."""
    if not isinstance(text, str):
        return f"must be a string, got {type(text).__name__}"
    return surrogate_problem(text)


def inline_problem(content: Sequence[UserPart], limit: int) -> tuple[str, str] | None:
    """Whether ``content``'s inline bytes stay within ``limit``."""
    total = sum(inline_bytes(p) for p in content if isinstance(p, ImagePart | FilePart))
    if total > limit:
        return "content", f"{total:,} bytes of inline images and files, over the limit of {limit:,}"
    return None


def capability_problem(content: Sequence[UserPart], model: ModelInfo) -> tuple[str, str] | None:
    """The first part whose type ``model`` does not take as input, or that its provider's
    wire cannot carry (``MEDIA_LIMITS``, ``FILE_URL_REFUSED``), or None."""
    if not content:  # a user_text turn (most): nothing to look up
        return None
    limits = MEDIA_LIMITS.get(model.provider, {})
    encoded = 0
    for index, part in enumerate(content):
        if not isinstance(part, ImagePart | FilePart):
            continue
        if kind_of(part) not in model.inputs:
            return f"content[{index}]", (f"{model.provider} model {model.name!r} does not "
                                         f"take {kind_of(part)} input"
                                         f"{unknown_model_hint(model)}")
        if part.url is not None and isinstance(part, FilePart) \
                and model.provider in FILE_URL_REFUSED:
            return f"content[{index}].url", (f"{model.provider} takes no file URL (its "
                                             "wire has none): send the PDF's bytes inline")
        size = base64_chars(inline_bytes(part))
        if isinstance(part, ImagePart) and size > limits.get("image", size):
            return f"content[{index}].data", (
                f"{model.provider} takes an image of up to {limits['image']:,} base64 "
                f"characters, this one is {size:,} ({inline_bytes(part):,} bytes)")
        encoded += size
    images = sum(1 for part in content if isinstance(part, ImagePart))
    if images > limits.get("images", images):
        return "content", (f"{model.provider} takes up to {limits['images']} images a "
                           f"request, this turn has {images}")
    if encoded > limits.get("request", encoded):
        return "content", (f"{model.provider} takes up to {limits['request']:,} base64 "
                           f"characters of inline images and files a request, this turn's "
                           f"are {encoded:,}")
    return None


def base64_chars(size: int) -> int:
    """How many characters ``size`` bytes take in base64."""
    return (size + 2) // 3 * 4


def content_text(content: Sequence[object]) -> str:
    """The text parts of ``content``, joined: a user message's text."""
    return "".join(p.text for p in content if isinstance(p, TextPart))


def for_model(parts: Sequence[Part], model: ModelInfo) -> tuple[Part, ...]:
    """A stored user message's parts as ``model`` can take them: an image or a file of a
    type it does not take becomes its ``omitted_text`` (a provider switch replaying
    history; docs/decisions.md), and so does one ``TurnInput`` would have refused (a
    non-https or private URL, bytes that are not what their type says: an
    ``edit_message`` or a custom store can hold them, and every replay of the chat then
    failed with the provider's 400); a ``data:`` URL goes as the inline bytes it
    carries, as ``TurnInput`` takes one (embed7)."""
    if all(type(p) is TextPart for p in parts):
        return tuple(parts)
    last = len(parts) - 1
    return tuple(_sendable(p, at, last, model) if isinstance(p, ImagePart | FilePart)
                 else p for at, p in enumerate(parts))


def _sendable(part: ImagePart | FilePart, at: int, last: int,
              model: ModelInfo) -> ImagePart | FilePart | TextPart:
    """``part`` as sent to ``model``: itself, its inline form, or its omitted text."""
    if kind_of(part) not in model.inputs:
        return omitted_part(part, at, last)
    if part.data is None and is_data_url(part.url):
        try:
            part = _inlined(part, "parts")
        except InvalidInput:  # unreadable: said as a data: URL, not its whole text
            return omitted_part(attrs.evolve(part, url="data: URL"), at, last)
    if part_problem(part) is not None:
        return omitted_part(part, at, last)
    return part


def omitted_part(part: ImagePart | FilePart, at: int, last: int) -> TextPart:
    """``part``, the ``at``-th of a message's parts (the last is ``last``), as the text
    part sent in its place: its ``omitted_text`` on a line of its own, since the wires
    that take a message of text parts as one string join them as they are (``read`` and
    a file became ``read[file omitted: ...]``; embed6)."""
    text = omitted_text(part)
    return TextPart(text=("\n" if at > 0 else "") + text + ("\n" if at < last else ""))


def edit_problem(parts: Sequence[object]) -> tuple[str, str] | None:
    """The first image or file of an edit's ``parts`` that ``TurnInput`` would refuse in a
    new question (``part_problem``: an http or private-host URL, bytes that are not their
    type...; a ``data:`` URL is checked as the inline bytes it carries), named
    ``parts[i].field``; None when there is none. Other parts are not looked at: an edit
    of an answer holds an answer's parts."""
    for index, part in enumerate(parts):
        if not isinstance(part, ImagePart | FilePart):
            continue
        where = f"parts[{index}]"
        checked = part
        if part.data is None and is_data_url(part.url):
            try:
                checked = _inlined(part, where)
            except InvalidInput as exc:
                return exc.field, exc.problem
        problem = part_problem(checked)
        if problem is not None:
            return f"{where}.{problem[0]}", problem[1]
    return None


def check_edit_parts(parts: Sequence[object]) -> None:
    """Refuse an edit whose media a new question could not hold (``edit_problem``):
    every store's ``edit_message`` calls it before it writes anything.

    Raises:
        InvalidInput: naming the part (``parts[1].url``) and what is wrong with it.
    """
    problem = edit_problem(parts)
    if problem is not None:
        raise InvalidInput(*problem)
