"""A user message's parts in each wire's form: text, images and PDF files (issue 23).

One function per wire format, each taking the parts as the model can take them
(``user_parts``: an image or a file of a type the model does not take becomes its
``omitted_text``, for history replayed after a provider switch). A message of text
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

from collections.abc import Sequence

from turnstate.core._content import for_model
from turnstate.core._conversation import Part, TextPart
from turnstate.core._json import JsonObject
from turnstate.core._media import FilePart, ImagePart, base64_text, data_url, omitted_text
from turnstate.core._registry import ModelInfo

DEFAULT_FILENAME = "document.pdf"
"""The ``filename`` OpenAI's inline ``input_file`` and ``file`` parts need when the
part has none."""


def user_parts(parts: Sequence[Part], model: ModelInfo) -> tuple[Part, ...]:
    """A user message's parts as ``model`` takes them (``core._content.for_model``)."""
    return for_model(parts, model)


def plain_text(parts: Sequence[Part]) -> str | None:
    """The message's text when it holds text parts only (the text-only wire form)."""
    if all(type(p) is TextPart for p in parts):
        return "".join(p.text for p in parts if isinstance(p, TextPart))
    return None


def responses_content(parts: Sequence[Part]) -> list[JsonObject]:
    """OpenAI Responses ``input_*`` content parts."""
    out: list[JsonObject] = []
    for part in parts:
        if isinstance(part, TextPart):
            if part.text:
                out.append({"type": "input_text", "text": part.text})
        elif isinstance(part, ImagePart):
            out.append({"type": "input_image", "image_url": _url(part), "detail": "auto"})
        elif isinstance(part, FilePart):
            if part.data is not None:
                out.append({"type": "input_file", "filename": part.filename or DEFAULT_FILENAME,
                            "file_data": data_url(part.media_type, part.data)})
            else:
                out.append({"type": "input_file", "file_url": part.url})
    return out


def interactions_content(parts: Sequence[Part]) -> list[JsonObject]:
    """Gemini Interactions content of a ``user_input`` step."""
    out: list[JsonObject] = []
    for part in parts:
        if isinstance(part, TextPart):
            if part.text:
                out.append({"type": "text", "text": part.text})
        elif isinstance(part, ImagePart | FilePart):
            block: JsonObject = {"type": "image" if isinstance(part, ImagePart) else "document"}
            if part.data is not None:
                block["data"] = base64_text(part.data)
            else:
                block["uri"] = part.url
            if part.media_type is not None:
                block["mime_type"] = part.media_type
            out.append(block)
    return out


def anthropic_blocks(parts: Sequence[Part]) -> list[JsonObject]:
    """Anthropic Messages content blocks (empty text is left out: the API refuses it)."""
    out: list[JsonObject] = []
    for part in parts:
        if isinstance(part, TextPart):
            if part.text:
                out.append({"type": "text", "text": part.text})
        elif isinstance(part, ImagePart | FilePart):
            source: JsonObject = (
                {"type": "base64", "media_type": part.media_type, "data": base64_text(part.data)}
                if part.data is not None else {"type": "url", "url": part.url})
            block: JsonObject = {"type": "image" if isinstance(part, ImagePart) else "document",
                                 "source": source}
            if isinstance(part, FilePart) and part.filename:
                block["title"] = part.filename
            out.append(block)
    return out


def chat_content(parts: Sequence[Part]) -> list[JsonObject]:
    """Chat Completions user content parts."""
    out: list[JsonObject] = []
    for part in parts:
        if isinstance(part, TextPart):
            if part.text:
                out.append({"type": "text", "text": part.text})
        elif isinstance(part, ImagePart):
            out.append({"type": "image_url", "image_url": {"url": _url(part)}})
        elif isinstance(part, FilePart):
            if part.data is not None:
                out.append({"type": "file", "file": {
                    "filename": part.filename or DEFAULT_FILENAME,
                    "file_data": data_url(part.media_type, part.data)}})
            else:
                out.append({"type": "text", "text": omitted_text(part)})
    return out


def _url(part: ImagePart) -> str:
    if part.data is not None:
        return data_url(part.media_type or "", part.data)
    return part.url or ""
