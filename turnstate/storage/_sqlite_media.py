"""SQLite schema version 12: a message's media bytes in ``message_media``, apart from
its parts (``_media_apart``).

SQLite keeps a row as one record: reading ``parts`` read every page of its 22 MB of
base64 for a 16 MiB image, lean reads included (a lean list of a chat of ten such
images read 213 MiB from the file), and every later write of the row (the commit's
status) wrote it all again. Now ``parts`` holds each inline part's ``size`` and place
(``media``), and the bytes are one ``message_media`` row each, keyed by the message's
``(chat_id, seq)``: written when the message is begun or edited, deleted with it (the
trigger below covers every delete), and read only by full reads (``with_media``).
"""

from __future__ import annotations

import base64
import json
import sqlite3
from collections.abc import Sequence
from typing import Any

from turnstate.core._conversation import Message
from turnstate.storage._media_apart import parts_with_media
from turnstate.storage._records import decode_usage, parse_ts
from turnstate.storage._rows import ROLES, STATUSES, message_from_row

Conn = sqlite3.Connection

V12 = """
CREATE TABLE message_media (
    chat_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    place INTEGER NOT NULL CHECK (place > 0),
    data BLOB NOT NULL,
    PRIMARY KEY (chat_id, seq, place)
);
CREATE TRIGGER messages_leave_media AFTER DELETE ON messages BEGIN
    DELETE FROM message_media WHERE chat_id = OLD.chat_id AND seq = OLD.seq;
END;
"""
"""Version 12 (``MIGRATIONS[11]``); ``set_media_apart`` moves the existing rows' bytes."""

_DROP = "DELETE FROM message_media WHERE chat_id = ? AND seq = ?"
_PUT = "INSERT INTO message_media (chat_id, seq, place, data) VALUES (?, ?, ?, ?)"
_GET = "SELECT data FROM message_media WHERE chat_id = ? AND seq = ? ORDER BY place"
_MARK = '"media":'
"""In a parts column exactly when a part's bytes are apart (no part's text holds it:
JSON escapes a quote inside a string)."""


def put_media(conn: Conn, chat_id: str, seq: int, blobs: Sequence[bytes]) -> None:
    """The message's blobs (``media_apart``'s), replacing what it held (none: an edit
    that dropped its images)."""
    conn.execute(_DROP, (chat_id, seq))
    if blobs:
        conn.executemany(_PUT, [(chat_id, seq, place, blob)
                                for place, blob in enumerate(blobs, 1)])


def media_begun(conn: Conn, chat_id: str, seq: int, blobs: Sequence[bytes]) -> None:
    """A begun question's blobs: nothing at all to do for a question without media."""
    if blobs:
        put_media(conn, chat_id, seq, blobs)


def with_media(conn: Conn, row: Sequence[Any]) -> Message:
    """``message_from_row``, its media bytes read back when they are apart."""
    parts = row[5]
    if _MARK not in parts:
        return message_from_row(row)
    blobs = [blob for (blob,) in conn.execute(_GET, (row[1], row[2]))]
    return Message(
        id=row[0], chat_id=row[1], seq=row[2], role=ROLES[row[3]], status=STATUSES[row[4]],
        parts=parts_with_media(parts, blobs), provider_state=row[6],
        usage=decode_usage(row[7]), created_at=parse_ts(row[8]), updated_at=parse_ts(row[9]))


def set_media_apart(conn: Conn) -> None:
    """Version 12's backfill: each stored image's and file's base64 ``data`` becomes a
    ``message_media`` row (decoded), ``size`` and ``media`` its place in the part."""
    rowids = [rowid for (rowid,) in conn.execute(
        "SELECT rowid FROM messages WHERE instr(parts, '\"data\":') > 0")]
    for rowid in rowids:
        chat_id, seq, text = conn.execute(
            "SELECT chat_id, seq, parts FROM messages WHERE rowid = ?", (rowid,)).fetchone()
        try:
            tree = json.loads(text)
        except (ValueError, RecursionError):
            continue  # unreadable: left as it is, as reads of it fail
        blobs: list[bytes] = []
        for item in tree if isinstance(tree, list) else ():
            data = item.get("data") if type(item) is dict else None
            if item.get("type") not in ("image", "file") or type(data) is not str:
                continue
            blob = base64.b64decode(data)
            blobs.append(blob)
            del item["data"]
            item.update(size=len(blob), media=len(blobs))
        if blobs:
            conn.execute("UPDATE messages SET parts = ? WHERE rowid = ?",
                         (json.dumps(tree, separators=(",", ":")), rowid))
            put_media(conn, chat_id, seq, blobs)
