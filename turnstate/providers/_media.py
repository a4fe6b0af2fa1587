"""A user message's parts in each wire's form: text, images and PDF files (issue 23).

One function per wire format, each taking the parts as the model can take them
(``core._content.for_model``: an image or a file of a type the model does not take
becomes its ``omitted_text``, for history replayed after a provider switch). A message of text
parts only is written as each codec always wrote it (``plain_text``), so text-only
requests keep their bytes and their cached prefixes.

* OpenAI Responses: ``input_text``, ``input_image`` (``image_url``: the https URL or a
  ``data:`` URL, ``detail: auto``), ``input_file`` (``file_data`` as a ``data:`` URL
  with a ``filename``, or ``file_url``).
* Gemini Interactions: ``text``, ``image`` and ``document`` content, each with base64
  ``data`` or a ``uri``, and ``mime_type``.
* Anthropic Messages: ``text``, ``image`` and ``document`` blocks with a ``base64`` or
  ``url`` source (a document's ``title`` is the file name).
* Chat Completions: ``text``, ``image_url`` (``{"url": ...}``) and ``file``
  (``{"filename", "file_data"}``); the wire has no file URL, so a URL file is sent as
  its ``omitted_text`` (docs/wire-coverage.md).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from turnstate.core._conversation import Part, TextPart
from turnstate.core._json import JsonObject
from turnstate.core._media import FilePart, ImagePart, base64_text, data_url, omitted_text

DEFAULT_FILENAME = "document.pdf"
"""The ``filename`` OpenAI's inline ``input_file`` and ``file`` parts need when the
part has none."""


def plain_text(parts: Sequence[Part]) -> str | None:
    """The message's text when it holds text parts only (the text-only wire form)."""
    if all(type(p) is TextPart for p in parts):
        return "".join(p.text for p in parts if isinstance(p, TextPart))
    return None


MediaBlock = Callable[[ImagePart | FilePart], JsonObject]
"""One wire's block for an image or a file."""


def _content(parts: Sequence[Part], text_type: str, media: MediaBlock) -> list[JsonObject]:
    """The wire's content list: a text block per non-empty text part (an empty one is
    left out: Anthropic refuses it, the others gain nothing), ``media`` for the rest."""
    out: list[JsonObject] = []
    for part in parts:
        if isinstance(part, TextPart):
            if part.text:
                out.append({"type": text_type, "text": part.text})
        elif isinstance(part, ImagePart | FilePart):
            out.append(media(part))
    return out


def _responses_media(part: ImagePart | FilePart) -> JsonObject:
    if isinstance(part, ImagePart):
        return {"type": "input_image", "image_url": _url(part), "detail": "auto"}
    if part.data is not None:
        return {"type": "input_file", "filename": part.filename or DEFAULT_FILENAME,
                "file_data": data_url(part.media_type, part.data)}
    return {"type": "input_file", "file_url": part.url}


def _interactions_media(part: ImagePart | FilePart) -> JsonObject:
    block: JsonObject = {"type": "image" if isinstance(part, ImagePart) else "document"}
    if part.data is not None:
        block["data"] = base64_text(part.data)
    else:
        block["uri"] = part.url
    if part.media_type is not None:
        block["mime_type"] = part.media_type
    return block


def _anthropic_media(part: ImagePart | FilePart) -> JsonObject:
    source: JsonObject = (
        {"type": "base64", "media_type": part.media_type, "data": base64_text(part.data)}
        if part.data is not None else {"type": "url", "url": part.url})
    block: JsonObject = {"type": "image" if isinstance(part, ImagePart) else "document",
                         "source": source}
    if isinstance(part, FilePart) and part.filename:
        block["title"] = part.filename
    return block


def _chat_media(part: ImagePart | FilePart) -> JsonObject:
    if isinstance(part, ImagePart):
        return {"type": "image_url", "image_url": {"url": _url(part)}}
    if part.data is not None:
        return {"type": "file", "file": {"filename": part.filename or DEFAULT_FILENAME,
                                         "file_data": data_url(part.media_type, part.data)}}
    return {"type": "text", "text": omitted_text(part)}


def responses_content(parts: Sequence[Part]) -> list[JsonObject]:
    """OpenAI Responses ``input_*`` content parts."""
    return _content(parts, "input_text", _responses_media)


def interactions_content(parts: Sequence[Part]) -> list[JsonObject]:
    """Gemini Interactions content of a ``user_input`` step."""
    return _content(parts, "text", _interactions_media)


def anthropic_blocks(parts: Sequence[Part]) -> list[JsonObject]:
    """Anthropic Messages content blocks."""
    return _content(parts, "text", _anthropic_media)


def chat_content(parts: Sequence[Part]) -> list[JsonObject]:
    """Chat Completions user content parts."""
    return _content(parts, "text", _chat_media)


def _url(part: ImagePart) -> str:
    if part.data is not None:
        return data_url(part.media_type or "", part.data)
    return part.url or ""
