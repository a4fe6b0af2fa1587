"""One stored image or PDF with its bytes, read alone (``Store.load_media_part``).

The media route (``GET /api/chats/{id}/messages/{seq}/parts/{index}``) serves one part,
and read it with ``load_messages``: every inline byte of the message decoded (a question
of eight 4 MiB photos read 32 MiB to serve one). Each store now reads the one part:

* PostgreSQL: the part's element of ``parts`` and its element of ``media``, one bytea
  sent (the server still reads the message's ``media`` array from disk whole: an array
  element is not read off TOAST by itself). Several parts of one message
  (``PostgresStore.load_media_parts``: a question's images read back for a local loop's
  next request) are one statement, the array read once, not one round trip (and one
  read of the whole array) a part.
* SQLite: the ``parts`` column (no bytes in it, ``_sqlite_media``) and the one
  ``message_media`` row.
* memory: the parts' JSON text parsed, only the part's base64 decoded.

A part that is not an image or a file, or an index past the message's parts, is None.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Sequence
from typing import Any

import attrs

from turnstate.core._errors import (
    ChatNotFound,
    ConfigurationError,
    MessageNotFound,
    StorageError,
)
from turnstate.core._media import FilePart, ImagePart
from turnstate.storage._media_json import MEDIA_TAGS
from turnstate.storage._records import structure_part
from turnstate.storage._window import held_seq

MediaPart = ImagePart | FilePart


def check_index(index: int) -> None:
    """``ConfigurationError`` for a negative index (PostgreSQL's ``->`` counts those
    from the end)."""
    if type(index) is not int or index < 0:
        msg = "load_media_part takes a part index of 0 or more"
        raise ConfigurationError(msg)


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        msg = "stored message parts are not JSON"
        raise StorageError(msg) from None


def _media(item: Any) -> dict[str, Any] | None:
    return item if type(item) is dict and item.get("type") in MEDIA_TAGS else None


def media_item(parts_text: str, index: int) -> dict[str, Any] | None:
    """Part ``index`` of a parts column when it is an image or a file (its JSON tree)."""
    tree = _json(parts_text)
    if not isinstance(tree, list):
        msg = "stored message parts are not a JSON list"
        raise StorageError(msg)
    return _media(tree[index]) if index < len(tree) else None


def media_place(item: dict[str, Any]) -> int | None:
    """Where the part's bytes are among the message's blobs (None: inline or a URL)."""
    place = item.get("media")
    return place if type(place) is int and place > 0 else None


def media_part(item: dict[str, Any], blob: bytes | None) -> MediaPart:
    """The part of ``item`` (``media_item``'s) with ``blob``, the bytes kept apart."""
    try:
        part = structure_part(item)
    except Exception as exc:  # cattrs raises many kinds; the row is unreadable either way
        msg = f"stored message parts are unreadable: {exc}"
        raise StorageError(msg) from None
    if not isinstance(part, ImagePart | FilePart):
        msg = "stored message parts are unreadable: a media part is not one"
        raise StorageError(msg)
    if media_place(item) is None:
        return part
    if blob is None:
        msg = "stored message parts are unreadable: a media part has no media bytes"
        raise StorageError(msg)
    return attrs.evolve(part, data=bytes(blob))


_SQLITE_PARTS = "SELECT parts FROM messages WHERE chat_id = ? AND seq = ?"
_SQLITE_BLOB = "SELECT data FROM message_media WHERE chat_id = ? AND seq = ? AND place = ?"


def sqlite_media_part(conn: sqlite3.Connection, chat_id: str, seq: int,
                      index: int) -> MediaPart | None:
    """SQLite's read (the chat's owner checked by the caller)."""
    row = conn.execute(_SQLITE_PARTS, (chat_id, held_seq(seq))).fetchone()
    if row is None:
        raise MessageNotFound(chat_id, seq)
    item = media_item(row[0], index)
    if item is None:
        return None
    place = media_place(item)
    blob = None if place is None else conn.execute(
        _SQLITE_BLOB, (chat_id, held_seq(seq), place)).fetchone()
    return media_part(item, None if blob is None else blob[0])


# $1 chat, $2 owner (NULL: any), $3 seq, $4 the part's index. No row: no such chat (or
# not the owner's); a NULL seq: no such message; a NULL part: no part at that index.
PG_MEDIA_PART = """SELECT m.seq, m.parts -> $4::int,
    CASE WHEN jsonb_typeof(m.parts -> $4::int -> 'media') = 'number'
         THEN m.media[(m.parts -> $4::int ->> 'media')::int] END
    FROM chats c LEFT JOIN messages m ON m.chat_id = c.id AND m.seq = $3::bigint
    WHERE c.id = $1 AND ($2::text IS NULL OR c.owner = $2)"""


def pg_media_part(rows: Sequence[Any], chat_id: str, seq: int,
                  decode: Callable[[str], str]) -> MediaPart | None:
    """``PG_MEDIA_PART``'s rows as the part (``decode``: the jsonb text as JSON text,
    ``from_pg_json``); ``ChatNotFound`` for no row, ``MessageNotFound`` for no message."""
    if not rows:
        raise ChatNotFound(chat_id)
    found_seq, text, blob = rows[0]
    if found_seq is None:
        raise MessageNotFound(chat_id, seq)
    item = None if text is None else _media(_json(decode(text)))
    return None if item is None else media_part(item, blob)


# $1 chat, $2 owner (NULL: any), $3 seq: the message's parts (no bytes in them) and its
# blobs, the ``media`` array read once. No row: no such chat; a NULL seq: no message.
PG_MEDIA_PARTS = """SELECT m.seq, m.parts, m.media
    FROM chats c LEFT JOIN messages m ON m.chat_id = c.id AND m.seq = $3::bigint
    WHERE c.id = $1 AND ($2::text IS NULL OR c.owner = $2)"""


def pg_media_parts(rows: Sequence[Any], chat_id: str, seq: int, indexes: Sequence[int],
                   decode: Callable[[str], str]) -> tuple[MediaPart | None, ...]:
    """``PG_MEDIA_PARTS``' rows as the parts at ``indexes`` (each as ``pg_media_part``
    gives it: None for a part that is no image or file, or past the message's parts)."""
    if not rows:
        raise ChatNotFound(chat_id)
    found_seq, text, blobs = rows[0]
    if found_seq is None:
        raise MessageNotFound(chat_id, seq)
    tree = _json(decode(text))
    if not isinstance(tree, list):
        msg = "stored message parts are not a JSON list"
        raise StorageError(msg)
    parts: list[MediaPart | None] = []
    for index in indexes:
        item = _media(tree[index]) if index < len(tree) else None
        if item is None:
            parts.append(None)
            continue
        place = media_place(item)
        blob = None if place is None or blobs is None or place > len(blobs) \
            else blobs[place - 1]
        parts.append(media_part(item, blob))
    return tuple(parts)
