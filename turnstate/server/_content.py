"""A turn's user content parts as the HTTP API takes them (issue 23 item 2).

``content`` is a list beside ``text``, each part a JSON object, camelCase as the chat
view shows it::

    {"type": "text", "text": "what is on this picture?"}
    {"type": "image", "mediaType": "image/png", "data": "<standard base64>"}
    {"type": "image", "url": "https://example.com/cat.jpg", "filename": "cat.jpg"}
    {"type": "file", "mediaType": "application/pdf", "data": "...", "filename": "a.pdf"}

Each part is checked here, before the engine is asked: its shape (400 naming
``content[i]`` or ``content[i].data``...), the part checks of ``turnstate.core``
(media type, https URL, filename), and the inline bytes of the whole turn against the
engine's ``TurnLimits.max_inline_bytes`` (413 ``content_too_large``). What the model
takes (``ModelInfo.inputs``) the engine checks, a 400 naming the part as well.
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import Any, NoReturn

from turnstate.core import FilePart, ImagePart, TextPart, UserPart
from turnstate.core._errors import InvalidInput
from turnstate.core._media import (
    PDF,
    decoded_base64,
    inline_bytes,
    part_problem,
)
from turnstate.core._text import first_lone_surrogate
from turnstate.server._http import ApiError, bad_field

MAX_PARTS = 32
"""Parts one turn may carry."""

_KEYS = {"text": frozenset({"type", "text"}),
         "image": frozenset({"type", "mediaType", "data", "url", "filename"}),
         "file": frozenset({"type", "mediaType", "data", "url", "filename"})}
_API_NAMES = {"media_type": "mediaType"}


def _refuse(field: str, message: str) -> NoReturn:
    raise bad_field(field, message)


def content_parts(raw: Any, *, max_text_chars: int, max_inline_bytes: int
                  ) -> tuple[UserPart, ...]:
    """The body's ``content`` as parts (empty when absent), or a 400/413 naming the
    part at fault."""
    if raw is None:
        return ()
    if not isinstance(raw, list) or len(raw) > MAX_PARTS:
        _refuse("content", f"content must be a list of at most {MAX_PARTS} parts")
    parts = tuple(_part(item, f"content[{index}]", max_text_chars)
                  for index, item in enumerate(raw))
    total = sum(inline_bytes(p) for p in parts if isinstance(p, ImagePart | FilePart))
    if total > max_inline_bytes:
        raise ApiError(413, "content_too_large",
                       f"the parts carry {total:,} inline bytes; a turn takes at most "
                       f"{max_inline_bytes:,}", field="content")
    return parts


def _part(item: Any, where: str, max_text_chars: int) -> UserPart:
    kind = item.get("type") if isinstance(item, dict) else None
    if not isinstance(kind, str) or kind not in _KEYS:
        _refuse(where, "each part must be an object whose type is text, image or file")
    unknown = sorted(set(item) - _KEYS[kind])
    if unknown:
        _refuse(f"{where}.{unknown[0]}", f"a {kind} part has no field {unknown[0]!r}")
    if kind == "text":
        text = item.get("text")
        if not isinstance(text, str):
            _refuse(f"{where}.text", "text must be a string")
        if len(text) > max_text_chars:  # as the body's own text fields (``text_field``)
            raise ApiError(413, "text_too_long", f"text is longer than {max_text_chars} "
                           "characters", field=f"{where}.text")
        if first_lone_surrogate(text) is not None:
            _refuse(f"{where}.text", "text is not valid Unicode text")
        return TextPart(text=text)
    media_type = _optional_text(item, "mediaType", where)
    data, url = _data(item, where), _optional_text(item, "url", where)
    part: ImagePart | FilePart
    if kind == "image":
        part = ImagePart(media_type=media_type, data=data, url=url,
                         filename=_optional_text(item, "filename", where))
    else:
        part = FilePart(media_type=media_type or PDF, data=data, url=url,
                        filename=_optional_text(item, "filename", where))
    problem = part_problem(part)
    if problem is not None:
        field, message = problem
        _refuse(f"{where}.{_API_NAMES.get(field, field)}", message)
    return part


def _optional_text(item: dict[str, Any], key: str, where: str) -> str | None:
    value = item.get(key)
    if value is not None and not isinstance(value, str):
        _refuse(f"{where}.{key}", f"{key} must be a string")
    return value


def _data(item: dict[str, Any], where: str) -> bytes | None:
    """Inline bytes: standard base64 text (a ``data:`` URL's part after the comma)."""
    value = item.get("data")
    if value is None:
        return None
    if not isinstance(value, str):
        _refuse(f"{where}.data", "data must be standard base64 text")
    try:
        return decoded_base64(value)
    except (binascii.Error, ValueError):
        _refuse(f"{where}.data", "data is not standard base64 text")


def ui_file_part(part: dict[str, Any], where: str) -> dict[str, Any]:
    """A Vercel AI SDK ``file`` part (``{"type": "file", "mediaType", "url",
    "filename"?}``, the ``url`` a ``data:`` URL or an https one) as a ``content`` part of
    this API: an image for the four image types, else a file."""
    media_type, url = part.get("mediaType"), part.get("url")
    if not isinstance(media_type, str) or not isinstance(url, str):
        _refuse(where, "a file part needs mediaType and url strings")
    kind = "image" if media_type.startswith("image/") else "file"
    fields: dict[str, Any] = {"type": kind, "mediaType": media_type}
    if isinstance(part.get("filename"), str):
        fields["filename"] = part["filename"]
    if not url.startswith("data:"):
        return {**fields, "url": url}
    head, comma, data = url.partition(",")
    if not comma or head != f"data:{media_type};base64":
        _refuse(f"{where}.url", f"a data URL must be data:{media_type};base64,...")
    return {**fields, "data": data}


def api_part(part: UserPart) -> dict[str, Any]:
    """A stored user part as a ``content`` part again (a question asked once more)."""
    if isinstance(part, TextPart):
        return {"type": "text", "text": part.text}
    fields: dict[str, Any] = {"type": "image" if isinstance(part, ImagePart) else "file",
                              "mediaType": part.media_type}
    if part.data is not None:
        fields["data"] = base64.b64encode(part.data).decode("ascii")
    else:
        fields["url"] = part.url
    if part.filename is not None:
        fields["filename"] = part.filename
    return fields


def text_first(body: dict[str, Any]) -> bool:
    """Whether the body's ``text`` went in front of its ``content`` parts (``turn_input``):
    the engine's ``content[i]`` is then the body's ``content[i - 1]``."""
    text = body.get("text")
    return body.get("content") is not None and isinstance(text, str) and bool(text)


def body_field(exc: InvalidInput, shift: bool) -> InvalidInput:
    """The engine's refusal with its ``content[i]`` named as the body names the part."""
    match = re.fullmatch(r"content\[(\d+)\](.*)", exc.field or "")
    if not shift or match is None or match.group(1) == "0":
        return exc
    return InvalidInput(f"content[{int(match.group(1)) - 1}]{match.group(2)}", exc.problem)
