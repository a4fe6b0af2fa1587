"""``SqliteStore``: the Store on SQLite, one connection with its own worker thread.

One connection does all the work (SQLite allows one writer at a time; WAL lets readers
in other processes carry on). Every operation is one plain function run on the
connection's worker thread (or inline, while the worker is idle): a turn step is
``BEGIN IMMEDIATE``, its statements and ``COMMIT`` in a single call, rolled back on any
error. A cursor turn's begin (on a chat this store created or committed last) and its
commit are one statement each instead, SQLite's autocommit, whose trigger runs the
step's statements and undoes them all if a check fails (``_sqlite_sql.BEGIN_KNOWN``,
``COMMIT_KNOWN``); a refused one is followed by the full transaction, which decides.
Because the worker runs one function at a time, and the inline path waits until the
worker has finished everything submitted (cancelled callers included), operations of
concurrent tasks never interleave inside a transaction.

Serialisation lives in ``_records``, the statements in ``_sqlite_sql`` and the connection
plumbing (open, migrate, inline-or-hop transactions) in ``_sqlite_conn``; this module holds
the store's operations.
"""

from __future__ import annotations

import functools
import logging
import sqlite3
import uuid
from collections.abc import Sequence
from typing import TypeVar

from turnstate.core._content import check_edit_parts
from turnstate.core._context import part_chars
from turnstate.core._conversation import Message, Part
from turnstate.core._errors import (
    ChatAlreadyExists,
    TurnNotFound,
)
from turnstate.storage import _sqlite_edits as edits
from turnstate.storage import _sqlite_quota as quota
from turnstate.storage import _sqlite_sql as q
from turnstate.storage import _sqlite_titles as titles_sql
from turnstate.storage._chat_search import check_query, sqlite_search
from turnstate.storage._expected import ExpectedMessage
from turnstate.storage._lean_message import LeanMessage
from turnstate.storage._media_apart import media_apart
from turnstate.storage._media_part import MediaPart, check_index, sqlite_media_part
from turnstate.storage._protocol import (
    ChatPosition,
    ChatRecord,
    LeanWindow,
    MessageWindow,
    TurnRecord,
)
from turnstate.storage._quota import check_quota
from turnstate.storage._record_checks import check_limit, check_new_chat, check_title
from turnstate.storage._records import CLEAR_LOG
from turnstate.storage._rows import chat_from_row, turn_from_row
from turnstate.storage._sqlite_conn import Conn
from turnstate.storage._sqlite_keys import KEY_OF_TURN, TURN_BY_KEY
from turnstate.storage._sqlite_log import SqliteTurnLog
from turnstate.storage._sqlite_media import put_media
from turnstate.storage._sqlite_turns import SqliteTurns
from turnstate.storage._window import check_window

_LOG = logging.getLogger("turnstate")
T = TypeVar("T")


class SqliteStore(SqliteTurns):
    """A Store on an SQLite file (or ``:memory:``), through one ``sqlite3`` connection.

    Open it with ``async with SqliteStore.open(path) as store``; the constructor only
    wraps a connection that ``open`` has configured and migrated.
    """


    @functools.cached_property
    def turn_log(self) -> SqliteTurnLog:
        """The turn-events log (``_turn_log``), in the same file."""
        return SqliteTurnLog(self)

    # -- chats and reads ---------------------------------------------------------------

    async def create_chat(self, *, owner: str, chat_id: str | None = None,
                          max_chats: int | None = None) -> ChatRecord:
        chat_id = uuid.uuid4().hex if chat_id is None else chat_id
        check_new_chat(chat_id, owner, max_chats)
        now = self._now()
        row = (chat_id, owner, now, now, 0, None, None, None, None, None, 0)

        def insert(conn: Conn) -> None:
            titles_sql.refuse_over_limit(conn, owner, max_chats)
            try:
                conn.execute(f"INSERT INTO chats ({q.CHAT}) VALUES "
                             "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", row)
            except sqlite3.IntegrityError:
                raise ChatAlreadyExists(chat_id) from None

        await self._write("create_chat", insert)  # inline when nothing is queued (no hop)
        chat = chat_from_row(row)
        self._remember(chat, 0, 0)
        return chat

    async def load_chat(self, chat_id: str, *, owner: str | None = None) -> ChatRecord:
        return await self._read(lambda conn: q.read_chat(conn, chat_id, owner))

    async def rename_chat(self, chat_id: str, title: str | None, *,
                          owner: str | None = None) -> None:
        check_title(title)
        await self._write("rename_chat",
                          lambda conn: titles_sql.rename(conn, chat_id, title, owner))

    async def chat_titles(self, chat_ids: Sequence[str], *,
                          owner: str) -> dict[str, str]:
        ids = list(chat_ids)
        return await self._run(lambda conn: titles_sql.titles(conn, ids, owner))

    async def list_chats(
        self, owner: str, *, limit: int | None = None, after: ChatPosition | None = None
    ) -> tuple[ChatRecord, ...]:
        check_limit(limit)
        sql, params = q.list_chats_query(owner, limit, after)
        rows = await self._run(lambda conn: conn.execute(sql, params).fetchall())
        return tuple(chat_from_row(row) for row in rows)

    async def search_chats(
        self, owner: str, query: str, *, limit: int | None = None,
        after: ChatPosition | None = None,
    ) -> tuple[ChatRecord, ...]:
        check_limit(limit)
        needle = check_query(query)
        rows = await self._run(lambda conn: sqlite_search(conn, owner, needle, limit, after))
        return tuple(chat_from_row(row) for row in rows)

    async def load_history(
        self, chat_id: str, *, owner: str | None = None
    ) -> tuple[Message, ...]:
        sql = (f"SELECT {q.MESSAGE} FROM messages WHERE chat_id = ? AND status = 'completed' "
               "ORDER BY seq")
        return await self._run(lambda conn: q.read_messages(conn, chat_id, sql, owner))

    async def list_messages(
        self, chat_id: str, *, owner: str | None = None
    ) -> tuple[Message, ...]:
        sql = f"SELECT {q.MESSAGE} FROM messages WHERE chat_id = ? ORDER BY seq"
        return await self._run(lambda conn: q.read_messages(conn, chat_id, sql, owner))

    async def load_messages(
        self, chat_id: str, *, limit: int, before_seq: int | None = None,
        after_seq: int | None = None, owner: str | None = None,
    ) -> MessageWindow:
        check_window(limit, before_seq, after_seq)
        return await self._run(lambda conn: q.read_window(
            conn, chat_id, limit=limit, before_seq=before_seq, after_seq=after_seq,
            owner=owner))

    async def load_messages_lean(
        self, chat_id: str, *, limit: int, before_seq: int | None = None,
        after_seq: int | None = None, owner: str | None = None,
    ) -> LeanWindow:
        check_window(limit, before_seq, after_seq)
        return await self._run(lambda conn: q.read_lean_window(
            conn, chat_id, limit=limit, before_seq=before_seq, after_seq=after_seq,
            owner=owner))

    async def list_messages_lean(
        self, chat_id: str, *, owner: str | None = None
    ) -> tuple[LeanMessage, ...]:
        sql = f"SELECT {q.MESSAGE} FROM messages WHERE chat_id = ? ORDER BY seq"
        return await self._run(lambda conn: q.read_lean_messages(conn, chat_id, sql, owner))

    async def load_media_part(
        self, chat_id: str, seq: int, index: int, *, owner: str | None = None
    ) -> MediaPart | None:
        check_index(index)

        def load(conn: Conn) -> MediaPart | None:
            q.check_owner(conn, chat_id, owner)
            return sqlite_media_part(conn, chat_id, seq, index)

        return await self._run(load)

    async def load_turn(self, turn_id: str) -> TurnRecord:
        def load(conn: Conn) -> TurnRecord:
            row = conn.execute(f"SELECT {q.TURN} FROM turns WHERE id = ?", (turn_id,)).fetchone()
            if row is None:
                raise TurnNotFound(turn_id)
            return turn_from_row(row)

        return await self._run(load)

    async def keyed_turn(self, chat_id: str, key: str) -> str | None:
        """The id of the turn of ``chat_id`` whose question, still held, was asked with
        the client key ``key`` (``TurnStart.client_key``), or None (the caller checks the
        chat's owner)."""
        def read(conn: Conn) -> str | None:
            row = conn.execute(TURN_BY_KEY, (chat_id, key, None, None)).fetchone()
            return None if row is None else str(row[0])

        return await self._run(read)

    async def turn_key(self, chat_id: str, turn_id: str) -> str | None:
        """The client key turn ``turn_id`` of ``chat_id`` was asked with and holds (None:
        none, taken since by another turn, or no such turn of that chat; the caller checks
        the chat's owner): a regenerate's turn takes its question's key over (edits10)."""
        def read(conn: Conn) -> str | None:
            row = conn.execute(KEY_OF_TURN, (turn_id, chat_id)).fetchone()
            return None if row is None or row[0] is None else str(row[0])

        return await self._run(read)

    async def list_turns(
        self, chat_id: str, *, limit: int | None = 20, owner: str | None = None
    ) -> tuple[TurnRecord, ...]:
        check_limit(limit)
        sql = f"SELECT {q.TURN} FROM turns WHERE chat_id = ? ORDER BY rowid DESC LIMIT ?"
        count = -1 if limit is None else limit  # SQLite: a negative LIMIT is no limit

        def load(conn: Conn) -> tuple[TurnRecord, ...]:
            q.read_chat(conn, chat_id, owner)
            return tuple(turn_from_row(row) for row in conn.execute(sql, (chat_id, count)))

        return await self._run(load)


    # -- changes outside turns ---------------------------------------------------------

    async def clear_provider_state(
        self, chat_id: str, *, reason: str, owner: str | None = None
    ) -> None:
        now = self._now()
        await self._write("clear", lambda conn: q.bump_version(conn, chat_id, now, owner))
        _LOG.info(CLEAR_LOG, chat_id, reason)

    async def edit_message(
        self, chat_id: str, seq: int, parts: Sequence[Part], *, owner: str | None = None,
        expect: ExpectedMessage | None = None,
    ) -> None:
        check_edit_parts(parts)  # media a question could not hold: nothing written
        (encoded, blobs), chars = media_apart(parts), part_chars(parts)
        now, leased_at = self._now(), self._lease_now()

        def edit(conn: Conn) -> None:
            edits.edit_message(conn, chat_id, seq, now, parts=encoded, chars=chars,
                               owner=owner, leased_at=leased_at, expect=expect)
            put_media(conn, chat_id, seq, blobs)  # the bytes apart (version 12)

        await self._write("edit", edit)
        _LOG.info(CLEAR_LOG, chat_id, "history_edited")

    async def delete_message(self, chat_id: str, seq: int, *, owner: str | None = None) -> None:
        now, leased_at = self._now(), self._lease_now()
        await self._write("delete", lambda conn: edits.delete_message(conn, chat_id, seq, now,
                                                                  owner, leased_at=leased_at))
        _LOG.info(CLEAR_LOG, chat_id, "history_deleted")

    async def delete_messages_from(
        self, chat_id: str, seq: int, *, owner: str | None = None,
        expect: ExpectedMessage | None = None,
    ) -> int:
        now, leased_at = self._now(), self._lease_now()
        count = await self._write("delete", lambda conn: edits.delete_from(
            conn, chat_id, seq, now, owner, leased_at=leased_at, expect=expect))
        _LOG.info(CLEAR_LOG, chat_id, "history_deleted")
        return count

    async def delete_chat(self, chat_id: str, *, owner: str | None = None) -> None:
        now, leased_at = self._now(), self._lease_now()
        await self._write("delete_chat", lambda conn: edits.delete_chat(
            conn, chat_id, now, owner, leased_at=leased_at))

    # -- the owners' stored bytes (``_sqlite_quota``) ----------------------------------

    async def storage_used(self, owner: str) -> int:
        return await self._run(lambda conn: quota.used(conn, owner))

    async def storage_quota(self) -> int | None:
        (limit,) = await self._run(lambda conn: conn.execute(quota.QUOTA).fetchone())
        return None if limit is None else int(limit)

    async def set_storage_quota(self, max_bytes: int | None) -> None:
        check_quota(max_bytes)
        await self._write("set_storage_quota", lambda conn: quota.set_quota(conn, max_bytes))
