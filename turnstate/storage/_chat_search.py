"""``Store.search_chats``: an owner's chats whose title or first question holds a text.

A chat matches when its title (``rename_chat``'s) or a text part of its first user
message (the one a chat without a title is listed by) contains the query, compared in
lower case (``str.lower`` here, PostgreSQL's ``lower`` there). Pages run in
``list_chats``' order (newest update first, ties by id descending) and start after a
``ChatPosition`` as its pages do. The SQL stores walk the owner's chats in the order of
their ``(owner, updated_at)`` index and look each one's title and first question up by
key, stopping at the page's end: no full scan of messages, no sort.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from typing import Any

from turnstate.core._errors import ConfigurationError
from turnstate.storage._protocol import ChatPosition
from turnstate.storage._records import format_ts
from turnstate.storage._rows import CHAT_COLUMNS

MAX_QUERY_CHARS = 200
"""The longest query a store takes."""


def check_query(query: object) -> str:
    """``query`` in lower case; ``ConfigurationError`` unless it is 1 to 200 characters."""
    if not isinstance(query, str) or not 1 <= len(query) <= MAX_QUERY_CHARS:
        msg = f"query must be a string of 1 to {MAX_QUERY_CHARS} characters, got {query!r:.40}"
        raise ConfigurationError(msg)
    return query.lower()


def parts_hold(parts_text: str | None, needle: str) -> bool:
    """Whether a stored parts column has a text part holding ``needle`` (lower case)."""
    if not parts_text:
        return False
    try:
        parts = json.loads(parts_text)
    except ValueError:
        return False
    return any(isinstance(part, dict) and part.get("type") == "text"
               and isinstance(part.get("text"), str) and needle in part["text"].lower()
               for part in parts) if isinstance(parts, list) else False


def matches(title: str | None, first_parts: str | None, needle: str) -> bool:
    return (title is not None and needle in title.lower()) or parts_hold(first_parts, needle)


_SQLITE_CHAT = ", ".join(f"c.{name}" for name in CHAT_COLUMNS)
_SQLITE_SEARCH = f"""SELECT {_SQLITE_CHAT},
    (SELECT t.title FROM chat_titles t WHERE t.chat_id = c.id),
    (SELECT m.parts FROM messages m WHERE m.chat_id = c.id AND m.role = 'user'
        ORDER BY m.seq LIMIT 1)
    FROM chats c WHERE c.owner = ? {{after}} ORDER BY c.updated_at DESC, c.id DESC"""


def sqlite_search(conn: sqlite3.Connection, owner: str, needle: str, limit: int | None,
                  after: ChatPosition | None) -> list[tuple[Any, ...]]:
    """The chat rows of one page of ``search_chats`` (SQLite), read row by row until
    the page is full."""
    params: list[Any] = [owner]
    clause = ""
    if after is not None:
        clause = "AND (c.updated_at < ? OR (c.updated_at = ? AND c.id < ?))"
        mark = format_ts(after.updated_at)
        params += [mark, mark, after.id]
    rows = conn.execute(_SQLITE_SEARCH.format(after=clause), params)
    return _first(rows, needle, limit)


def _first(rows: Iterator[tuple[Any, ...]], needle: str,
           limit: int | None) -> list[tuple[Any, ...]]:
    found: list[tuple[Any, ...]] = []
    if limit == 0:
        return found
    width = len(CHAT_COLUMNS)
    for row in rows:
        if matches(row[width], row[width + 1], needle):
            found.append(row[:width])
            if limit is not None and len(found) >= limit:
                break
    return found
