"""Messages read without their media bytes: what a view shows (``Store.load_messages_lean``).

A chat view, a chat list's titles and the UI history show an image or PDF only by
reference (its media type, size, token estimate and the route that serves its bytes),
yet a full read decodes every inline byte: ten chats of one 16 MiB image each made a
chat list take seconds and hold hundreds of MiB. A lean read gives each stored image or
file part as a ``MediaRef`` instead, its bytes never decoded:

* PostgreSQL keeps them apart from the parts (``media``, schema version 14): a lean
  read reads the parts alone, the bytes are never read from disk.
* SQLite and memory hold the parts as JSON text in the process; ``decode_lean_parts``
  parses it and keeps the base64 text's length only. (SQLite's own JSON functions were
  measured slower than Python's parser on a 16 MiB image: 0.35 s against 0.03 s.)

A ``LeanMessage`` is not a ``Message`` and a ``MediaRef`` not a ``Part``: no codec takes
one, and every store's writes refuse one with ``LeanPartRefused``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from turnstate.core._conversation import (
    PART_TAGS,
    Message,
    Part,
)
from turnstate.core._errors import LeanPartRefused, StorageError
from turnstate.core._media import FilePart, ImagePart, MediaRef
from turnstate.core._media_tokens import media_tokens
from turnstate.storage._lean_message import LeanMessage, LeanPart
from turnstate.storage._media_json import MEDIA_TAGS, stored_tokens
from turnstate.storage._records import decode_usage, parse_ts, structure_part
from turnstate.storage._rows import ROLES, STATUSES


def base64_size(text: str) -> int:
    """How many bytes the standard base64 ``text`` decodes to (read off its length)."""
    padding = 2 if text.endswith("==") else 1 if text.endswith("=") else 0
    return len(text) // 4 * 3 - padding


def _optional_str(item: dict[str, Any], key: str) -> str | None:
    value = item.get(key)
    if value is not None and type(value) is not str:
        msg = f"a media part's {key} must be text"
        raise TypeError(msg)
    return value


def _media_ref(item: dict[str, Any]) -> MediaRef:
    """A stored image or file part: ``data`` (memory, SQLite) read for its length only,
    or ``size`` as PostgreSQL keeps it in its place (``_postgres_media``)."""
    data = item.get("data")
    if data is not None:
        if type(data) is not str:
            msg = "a media part's data must be base64 text"
            raise TypeError(msg)
        size: int | None = base64_size(data)
    else:
        size = item.get("size")
        if size is not None and (type(size) is not int or size < 0):
            msg = "a media part's size must be a non-negative integer"
            raise TypeError(msg)
    return MediaRef(kind=item["type"], media_type=_optional_str(item, "mediaType"),
                    size=size, tokens=stored_tokens(item), url=_optional_str(item, "url"),
                    filename=_optional_str(item, "filename"))


def decode_lean_parts(text: str) -> tuple[LeanPart, ...]:
    """The parts column read lean: each image or file a ``MediaRef``. Raises
    ``StorageError`` for an unreadable column, as ``decode_parts`` does."""
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        msg = "stored message parts are not JSON"
        raise StorageError(msg) from None
    if not isinstance(data, list):
        msg = "stored message parts are not a JSON list"
        raise StorageError(msg)
    try:
        return tuple([_media_ref(item) if type(item) is dict and item.get("type") in MEDIA_TAGS
                      else _lean_other(structure_part(item)) for item in data])
    except Exception as exc:  # cattrs raises many kinds; the row is unreadable either way
        msg = f"stored message parts are unreadable: {exc}"
        raise StorageError(msg) from None


def _lean_other(part: Part) -> LeanPart:
    if isinstance(part, ImagePart | FilePart):  # its tag was read apart above
        raise TypeError(type(part).__name__)
    return part


def media_ref(part: ImagePart | FilePart) -> MediaRef:
    """A media part held in full as a lean read gives it (its tokens as stored)."""
    return MediaRef(kind=PART_TAGS[type(part)], media_type=part.media_type,
                    size=None if part.data is None else len(part.data),
                    tokens=media_tokens(part), url=part.url, filename=part.filename)


def lean_message(message: Message) -> LeanMessage:
    """A message read in full as a lean read gives it: its media parts ``MediaRef``."""
    return LeanMessage(
        id=message.id, chat_id=message.chat_id, seq=message.seq, role=message.role,
        status=message.status, created_at=message.created_at,
        updated_at=message.updated_at, provider_state=message.provider_state,
        usage=message.usage,
        parts=[media_ref(p) if isinstance(p, ImagePart | FilePart) else p
               for p in message.parts])


def refuse_lean_parts(parts: Sequence[object]) -> None:
    """Raise ``LeanPartRefused`` when ``parts`` hold a ``MediaRef``: what a store's
    writes do (the package's stores through their encoder; a store of its own calls
    this before writing parts it keeps as objects)."""
    if any(isinstance(part, MediaRef) for part in parts):
        raise LeanPartRefused


def lean_message_from_row(row: Sequence[Any]) -> LeanMessage:
    """``message_from_row`` (``MESSAGE_COLUMNS``' order), the parts read lean."""
    return LeanMessage(
        id=row[0], chat_id=row[1], seq=row[2], role=ROLES[row[3]], status=STATUSES[row[4]],
        parts=decode_lean_parts(row[5]), provider_state=row[6], usage=decode_usage(row[7]),
        created_at=parse_ts(row[8]), updated_at=parse_ts(row[9]),
    )
