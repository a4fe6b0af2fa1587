"""``SqliteStore``'s chat titles (schema version 10) and its bounded ``create_chat``.

Titles live in their own table, beside the chat row rather than in it: renaming a chat
touches none of the columns a turn reads and writes, and deleting the chat deletes its
title (``ON DELETE CASCADE``, and ``delete_chat`` names the table too).
"""

from __future__ import annotations

from collections.abc import Sequence

from turnstate.core._errors import ChatLimitReached
from turnstate.storage._sqlite_sql import Conn, check_owner

COUNT_CHATS = "SELECT count(*) FROM chats WHERE owner = ?"
SET_TITLE = """INSERT INTO chat_titles (chat_id, title) VALUES (?, ?)
    ON CONFLICT (chat_id) DO UPDATE SET title = excluded.title"""
DROP_TITLE = "DELETE FROM chat_titles WHERE chat_id = ?"


def refuse_over_limit(conn: Conn, owner: str, max_chats: int | None) -> None:
    """``ChatLimitReached`` when ``owner`` has ``max_chats`` chats already. Run inside the
    create's ``BEGIN IMMEDIATE``: no other process inserts between the count and it."""
    if max_chats is not None:
        (count,) = conn.execute(COUNT_CHATS, (owner,)).fetchone()
        if count >= max_chats:
            raise ChatLimitReached(owner, max_chats)


def rename(conn: Conn, chat_id: str, title: str | None, owner: str | None) -> None:
    check_owner(conn, chat_id, owner)
    if title is None:
        conn.execute(DROP_TITLE, (chat_id,))
    else:
        conn.execute(SET_TITLE, (chat_id, title))


_IDS_PER_READ = 500
"""Ids per ``IN (...)`` list, well under SQLite's bound on a statement's parameters."""


def titles(conn: Conn, chat_ids: Sequence[str], owner: str) -> dict[str, str]:
    found: dict[str, str] = {}
    for start in range(0, len(chat_ids), _IDS_PER_READ):
        part = chat_ids[start:start + _IDS_PER_READ]
        marks = ", ".join("?" * len(part))
        found.update(conn.execute(
            "SELECT t.chat_id, t.title FROM chat_titles t JOIN chats c ON c.id = t.chat_id "
            f"WHERE c.owner = ? AND t.chat_id IN ({marks})",
            (owner, *part)).fetchall())
    return found
