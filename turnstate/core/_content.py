"""A user message's content as a whole: the checks made before a turn takes its chat.

``content_problem`` checks each part's shape (``_media.part_problem``), naming the part
by its index; ``inline_problem`` bounds the inline bytes of one turn;
``capability_problem`` refuses a part type the model does not take
(``ModelInfo.inputs``). Each returns ``(field, problem)`` for ``InvalidInput``, or None.
"""

from __future__ import annotations

from collections.abc import Sequence

from turnstate.core._conversation import Part, TextPart, UserPart
from turnstate.core._media import (
    FilePart,
    ImagePart,
    inline_bytes,
    kind_of,
    omitted_text,
    part_problem,
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
    """The first part whose type ``model`` does not take as input, or None."""
    for index, part in enumerate(content):
        if isinstance(part, ImagePart | FilePart) and kind_of(part) not in model.inputs:
            return f"content[{index}]", (f"{model.provider} model {model.name!r} does not "
                                         f"take {kind_of(part)} input")
    return None


def content_text(content: Sequence[object]) -> str:
    """The text parts of ``content``, joined: a user message's text."""
    return "".join(p.text for p in content if isinstance(p, TextPart))


def for_model(parts: Sequence[Part], model: ModelInfo) -> tuple[Part, ...]:
    """A stored user message's parts as ``model`` can take them: an image or a file of a
    type it does not take becomes its ``omitted_text`` (a provider switch replaying
    history; docs/decisions.md)."""
    if all(type(p) is TextPart for p in parts):
        return tuple(parts)
    return tuple(TextPart(text=omitted_text(p))
                 if isinstance(p, ImagePart | FilePart) and kind_of(p) not in model.inputs
                 else p for p in parts)
