"""``Store.search_chats``: an owner's chats whose title or first question holds a text.

A chat matches when its title (``rename_chat``'s) or a text part of its first user
message (the one a chat without a title is listed by) contains the query, both
``fold``-ed: case folded as Unicode does it (``ß`` is ``ss``, a final ``ς`` is ``σ``) and
without the Latin, Greek and Cyrillic accents (``é`` is ``e``, Turkish ``İ`` is ``i``).
Every store folds in Python, here, so every store matches the same chats: PostgreSQL's
``lower`` depends on the database's ``LC_CTYPE`` (``C.UTF-8`` lowers ASCII only) and
folds neither ``ß`` nor a final sigma. Pages run in ``list_chats``' order (newest update
first, ties by id descending) and start after a ``ChatPosition`` as its pages do. The SQL
stores walk the owner's chats in the order of their ``(owner, updated_at)`` index and look
each one's title and first question up by key (PostgreSQL reads only the text parts'
text, ``PG_SEARCH_BATCH`` chats a statement), stopping at the page's end: no full scan of
messages, no sort.
"""

from __future__ import annotations

import json
import re
import sqlite3
import unicodedata
from collections.abc import Awaitable, Callable, Iterator, Sequence
from datetime import datetime
from typing import Any

from turnstate.core._errors import ConfigurationError
from turnstate.storage._protocol import ChatPosition
from turnstate.storage._records import format_ts
from turnstate.storage._rows import CHAT_COLUMNS

MAX_QUERY_CHARS = 200
"""The longest query a store takes."""


_ACCENTS = re.compile("[\u0300-\u036f]")
"""The combining diacritical marks ``fold`` drops once the text is decomposed: Latin,
Greek and Cyrillic accents; not the marks other scripts' letters are written with (an
Indic vowel sign is part of its word)."""


def fold(text: str) -> str:
    """``text`` as search compares it: compatibility-decomposed (``NFKD``: ``ﬁ`` is
    ``fi``, ``é`` is ``e`` and an accent), its ``_ACCENTS`` dropped, case folded."""
    if text.isascii():
        return text.lower()
    return _ACCENTS.sub("", unicodedata.normalize("NFKD", text)).casefold()


def check_query(query: object) -> str:
    """``query`` folded; ``ConfigurationError`` unless it is 1 to 200 characters."""
    if not isinstance(query, str) or not 1 <= len(query) <= MAX_QUERY_CHARS:
        msg = f"query must be a string of 1 to {MAX_QUERY_CHARS} characters, got {query!r:.40}"
        raise ConfigurationError(msg)
    return fold(query)


SEARCHED_CHARS = 2_000
"""The characters of a title or of a first question's text part that a search reads: a
search walks every chat of its owner when few match, and folding each whole question
(100,000 characters each at the server's limit, 35 ms) made one request of an owner with
a thousand such chats hold the event loop for 35 s."""
_PG_SEARCHED = 5 * SEARCHED_CHARS + 5  # stored characters: a NUL or surrogate is 5 (``to_pg_text``)


def _held(text: str, needle: str) -> bool:
    return needle in fold(text[:SEARCHED_CHARS])


def parts_hold(parts_text: str | None, needle: str) -> bool:
    """Whether a stored parts column has a text part holding ``needle`` (folded)."""
    if not parts_text:
        return False
    try:
        parts = json.loads(parts_text)
    except ValueError:
        return False
    return any(isinstance(part, dict) and part.get("type") == "text"
               and isinstance(part.get("text"), str) and _held(part["text"], needle)
               for part in parts) if isinstance(parts, list) else False


def matches(title: str | None, first_parts: str | None, needle: str) -> bool:
    return (title is not None and _held(title, needle)) or parts_hold(first_parts, needle)


PG_SEARCH_BATCH = 200
"""Chats one PostgreSQL statement of ``postgres_search`` reads (their titles and first
questions' text), the next from the last one's position."""

PG_SEARCH = """SELECT {chat},
    (SELECT t.title FROM chat_titles t WHERE t.chat_id = c.id),
    (SELECT array_agg(left(p ->> 'text', """ + str(_PG_SEARCHED) + """))
        FROM (SELECT m.parts FROM messages m WHERE m.chat_id = c.id AND m.role = 'user'
              ORDER BY m.seq LIMIT 1) f,
            jsonb_array_elements(f.parts) p WHERE p ->> 'type' = 'text')
    FROM chats c WHERE c.owner = $1
    AND ($2::timestamptz IS NULL OR (c.updated_at, c.id) < ($2, $3::text COLLATE "C"))
    ORDER BY c.updated_at DESC, c.id DESC LIMIT $4"""
"""A batch of an owner's chats in ``chats_by_owner``'s order, after the position ($2,
$3) when $2 is given, each with its title and its first question's text parts."""

Fetch = Callable[[Sequence[Any]], Awaitable[Sequence[Any]]]


async def postgres_search(fetch: Fetch, decode: Callable[[str], str], owner: str,
                          needle: str, *, limit: int | None, mark: datetime | None,
                          mark_id: str | None) -> list[Any]:
    """The chat rows of one page of ``search_chats`` (PostgreSQL): ``PG_SEARCH``'s
    batches (``fetch`` runs it with its parameters; ``decode`` reads a stored text)
    filtered here, until the page is full or the owner's chats are walked."""
    found: list[Any] = []
    width = len(CHAT_COLUMNS)
    while limit != 0:
        rows = await fetch((owner, mark, mark_id, PG_SEARCH_BATCH))
        for row in rows:
            title, texts = row[width], row[width + 1] or ()
            if (title is not None and _held(decode(title), needle)) or any(
                    text is not None and _held(decode(text), needle) for text in texts):
                found.append(row)
                if limit is not None and len(found) >= limit:
                    return found
        if len(rows) < PG_SEARCH_BATCH:
            break
        mark, mark_id = rows[-1][3], rows[-1][0]  # updated_at, id: the next batch's start
    return found


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
