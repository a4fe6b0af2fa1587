"""How images and files are stored in the parts JSON (issue 23; docs/decisions.md).

Inline bytes are standard base64 text. A media part leaves out what it does not have (a
URL image has no ``data``), always writes ``mediaType``, and carries ``tokens``: its
provider-neutral token estimate when written (``media_tokens``). ``history_chars``
counts a stored media part by that figure, read without decoding the bytes: by
``stored_chars`` in Python and by PostgreSQL's ``ts_part_chars`` (schema version 8);
it is ignored when the part is read back.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

import cattrs

from turnstate.core._convert import register_camel
from turnstate.core._media import FilePart, ImagePart
from turnstate.core._media_tokens import media_tokens

MEDIA_TAGS = frozenset({"image", "file"})
"""The part tags (``PART_TAGS``) of stored images and files."""


def register_media(converter: cattrs.Converter) -> None:
    """Teach ``converter`` bytes as base64 and the two media part classes."""
    converter.register_structure_hook(bytes, _structure_bytes)
    converter.register_unstructure_hook(bytes, lambda data: base64.b64encode(data).decode())
    for cls in (ImagePart, FilePart):
        register_camel(converter, cls, omit_if_default=True, always=("media_type",))
        plain = converter.get_unstructure_hook(cls)
        converter.register_unstructure_hook(
            cls, lambda part, plain=plain: {**plain(part), "tokens": media_tokens(part)})


def stored_tokens(item: dict[str, Any]) -> int:
    """A stored media part's ``tokens``.

    Raises:
        KeyError, ValueError: the part has none, or not a non-negative integer.
    """
    tokens = item["tokens"]
    if type(tokens) is not int or tokens < 0:
        msg = "a media part's tokens must be a non-negative integer"
        raise ValueError(msg)
    return tokens


def _structure_bytes(value: Any, _: Any) -> bytes:
    if type(value) is not str:
        msg = f"expected base64 text, got {type(value).__name__}"
        raise TypeError(msg)
    try:
        return base64.b64decode(value, validate=True)
    except binascii.Error as exc:
        msg = f"not base64: {exc}"
        raise ValueError(msg) from None
