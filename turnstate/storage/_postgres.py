"""``PostgresStore``: the Store on PostgreSQL through an asyncpg pool.

Several processes (server nodes) share one database. Each turn write (begin,
transition, commit, abort) is one call of a server-side function: one statement, so one
transaction and one round trip, with the chat's row locked for its duration. The commit
is a compare-and-swap on ``(id, version, active_turn_id)``. Lease times come from the
database's clock (``now()``), so processes with skewed clocks agree on who holds a chat;
a ``clock`` is injected only by tests.

The pool, opening and the retried statement call are ``_postgres_conn``'s.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg

from turnstate.core._content import check_edit_parts
from turnstate.core._context import part_chars
from turnstate.core._conversation import Message, Part, TransitionPart
from turnstate.core._errors import (
    ChatLimitReached,
    ChatNotFound,
    LeaseLost,
    TurnKeyRecorded,
    TurnNotFound,
)
from turnstate.storage import _postgres_quota as quota
from turnstate.storage import _postgres_sql as q
from turnstate.storage import _postgres_titles as titles
from turnstate.storage._chat_search import PG_SEARCH, check_query, postgres_search
from turnstate.storage._commit_columns import abort_billing, commit_columns
from turnstate.storage._expected import CutExpected, ExpectedMessage
from turnstate.storage._fence_signal import announce_fenced, announce_soon
from turnstate.storage._lean_message import LeanMessage
from turnstate.storage._media_part import (
    PG_MEDIA_PART,
    PG_MEDIA_PARTS,
    MediaPart,
    check_index,
    pg_media_part,
    pg_media_parts,
)
from turnstate.storage._postgres_conn import PostgresConnection
from turnstate.storage._protocol import (
    ChatPosition,
    ChatRecord,
    LeanWindow,
    LeaseRenewal,
    MessageWindow,
    TurnAbort,
    TurnCommit,
    TurnLease,
    TurnRecord,
    TurnStart,
)
from turnstate.storage._quota import check_quota
from turnstate.storage._record_checks import (
    check_limit,
    check_new_chat,
    check_storable,
    check_title,
)
from turnstate.storage._records import (
    CLEAR_LOG,
    RECLAIM_LOG,
    encode_parts,
    encode_path,
    lease_expiry,
    message_ids,
    utc_now,
)
from turnstate.storage._rows import CHAT_COLUMNS
from turnstate.storage._window import SEQ_BOUND, check_window, held_seq

_LOG = logging.getLogger("turnstate")
_SEARCH_CHATS = PG_SEARCH.format(chat=", ".join(f"c.{name}" for name in CHAT_COLUMNS))

class PostgresStore(PostgresConnection):
    """A Store on a PostgreSQL schema, through an asyncpg pool.

    Open it with ``async with PostgresStore.open(dsn) as store``; the constructor only
    wraps a pool that ``open`` has created and migrated.
    """

    # -- chats and reads ---------------------------------------------------------------

    async def create_chat(self, *, owner: str, chat_id: str | None = None,
                          max_chats: int | None = None) -> ChatRecord:
        chat_id = uuid.uuid4().hex if chat_id is None else chat_id
        check_new_chat(chat_id, owner, max_chats)
        try:
            rows = await self._call(q.INSERT_CHAT, (q.to_pg_text(chat_id),
                                                    q.to_pg_text(owner), self._now(),
                                                    max_chats),
                                    write=True, duplicate_chat=chat_id)
        except ChatLimitReached:  # the function knows the limit, not the owner's name
            raise ChatLimitReached(owner, max_chats or 0) from None
        return q.chat_from_pg(rows[0])

    async def rename_chat(self, chat_id: str, title: str | None, *,
                          owner: str | None = None) -> None:
        check_title(title)
        await self._call(titles.RENAME_CHAT, (q.to_pg_text(chat_id), _opt_pg_text(title),
                                              _opt_pg_text(owner)),
                         write=True, chat_id=chat_id)

    async def chat_titles(self, chat_ids: Sequence[str], *,
                          owner: str) -> dict[str, str]:
        rows = await self._call(titles.CHAT_TITLES, (
            q.to_pg_text(owner), [q.to_pg_text(chat_id) for chat_id in chat_ids]),
            write=False)
        return {q.from_pg_text(chat_id): q.from_pg_text(title) for chat_id, title in rows}

    async def load_chat(self, chat_id: str, *, owner: str | None = None) -> ChatRecord:
        rows = await self._call(q.SELECT_CHAT, (q.to_pg_text(chat_id), _opt_pg_text(owner)),
                                write=False)
        if not rows:
            raise ChatNotFound(chat_id)
        return q.chat_from_pg(rows[0])

    async def list_chats(
        self, owner: str, *, limit: int | None = None, after: ChatPosition | None = None
    ) -> tuple[ChatRecord, ...]:
        check_limit(limit)
        mark, mark_id = None, None
        if after is not None:
            mark = after.updated_at if after.updated_at.tzinfo else \
                after.updated_at.replace(tzinfo=UTC)  # naive is UTC, as in the other stores
            mark_id = q.to_pg_text(after.id)
        rows = await self._call(q.LIST_CHATS, (q.to_pg_text(owner), mark, mark_id, limit),
                                write=False)
        return tuple(q.chat_from_pg(row) for row in rows)

    async def search_chats(
        self, owner: str, query: str, *, limit: int | None = None,
        after: ChatPosition | None = None,
    ) -> tuple[ChatRecord, ...]:
        check_limit(limit)
        needle = check_query(query)
        mark = None if after is None else after.updated_at if after.updated_at.tzinfo else \
            after.updated_at.replace(tzinfo=UTC)

        async def fetch(params: Sequence[object]) -> list[asyncpg.Record]:
            return await self._call(_SEARCH_CHATS, params, write=False)
        rows = await postgres_search(fetch, q.from_pg_text, q.to_pg_text(owner), needle,
                                     limit=limit, mark=mark,
                                     mark_id=None if after is None else q.to_pg_text(after.id))
        return tuple(q.chat_from_pg(row) for row in rows)

    async def load_history(
        self, chat_id: str, *, owner: str | None = None
    ) -> tuple[Message, ...]:
        return await self._messages(q.SELECT_HISTORY, chat_id, owner)

    async def list_messages(
        self, chat_id: str, *, owner: str | None = None
    ) -> tuple[Message, ...]:
        return await self._messages(q.SELECT_MESSAGES, chat_id, owner)

    async def load_messages(
        self, chat_id: str, *, limit: int, before_seq: int | None = None,
        after_seq: int | None = None, owner: str | None = None,
    ) -> MessageWindow:
        check_window(limit, before_seq, after_seq)
        sql, seq = (q.WINDOW_AFTER, held_seq(after_seq)) if after_seq is not None else \
            (q.WINDOW_BEFORE, SEQ_BOUND if before_seq is None else held_seq(before_seq))
        rows = await self._call(sql, (q.to_pg_text(chat_id), _opt_pg_text(owner), seq,
                                      limit + 1), write=False)
        return q.window_from_pg(rows, chat_id, limit, after=after_seq is not None)

    async def load_messages_lean(
        self, chat_id: str, *, limit: int, before_seq: int | None = None,
        after_seq: int | None = None, owner: str | None = None,
    ) -> LeanWindow:
        check_window(limit, before_seq, after_seq)
        sql, seq = (q.WINDOW_AFTER_LEAN, held_seq(after_seq)) if after_seq is not None else \
            (q.WINDOW_BEFORE_LEAN, SEQ_BOUND if before_seq is None else held_seq(before_seq))
        rows = await self._call(sql, (q.to_pg_text(chat_id), _opt_pg_text(owner), seq,
                                      limit + 1), write=False)
        return q.lean_window_from_pg(rows, chat_id, limit, after=after_seq is not None)

    async def load_media_part(
        self, chat_id: str, seq: int, index: int, *, owner: str | None = None
    ) -> MediaPart | None:
        check_index(index)
        rows = await self._call(PG_MEDIA_PART, (q.to_pg_text(chat_id), _opt_pg_text(owner),
                                                held_seq(seq), index), write=False)
        return pg_media_part(rows, chat_id, seq, q.from_pg_json)

    async def load_media_parts(
        self, chat_id: str, seq: int, indexes: Sequence[int], *, owner: str | None = None
    ) -> tuple[MediaPart | None, ...]:
        """``load_media_part`` of each of ``indexes`` of one message, in one statement
        (``storage._media_part.PG_MEDIA_PARTS``)."""
        for index in indexes:
            check_index(index)
        rows = await self._call(PG_MEDIA_PARTS, (q.to_pg_text(chat_id), _opt_pg_text(owner),
                                                 held_seq(seq)), write=False)
        return pg_media_parts(rows, chat_id, seq, indexes, q.from_pg_json)

    async def list_messages_lean(
        self, chat_id: str, *, owner: str | None = None
    ) -> tuple[LeanMessage, ...]:
        rows = await self._message_rows(q.SELECT_MESSAGES_LEAN, chat_id, owner)
        return tuple([q.lean_message_from_pg(row) for row in rows])

    async def _messages(self, sql: str, chat_id: str, owner: str | None) -> tuple[Message, ...]:
        rows = await self._message_rows(sql, chat_id, owner)
        return tuple([q.message_from_pg(row) for row in rows])

    async def _message_rows(self, sql: str, chat_id: str, owner: str | None
                            ) -> list[asyncpg.Record]:
        rows = await self._call(sql, (q.to_pg_text(chat_id), _opt_pg_text(owner)), write=False)
        if not rows:
            raise ChatNotFound(chat_id)
        return [] if rows[0][0] is None else rows

    async def load_turn(self, turn_id: str) -> TurnRecord:
        rows = await self._call(q.SELECT_TURN, (q.to_pg_text(turn_id),), write=False)
        if not rows:
            raise TurnNotFound(turn_id)
        return q.turn_from_pg(rows[0])

    async def keyed_turn(self, chat_id: str, key: str) -> str | None:
        """The id of the turn of ``chat_id`` whose question, still held, was asked with
        the client key ``key`` (``TurnStart.client_key``), or None (the caller checks the
        chat's owner)."""
        rows = await self._call(q.TURN_BY_KEY, (q.to_pg_text(chat_id), q.to_pg_text(key)),
                                write=False)
        return q.from_pg_text(rows[0][0]) if rows else None

    async def turn_key(self, chat_id: str, turn_id: str) -> str | None:
        """The client key turn ``turn_id`` of ``chat_id`` holds, or None (as SQLite's)."""
        rows = await self._call(q.KEY_OF_TURN, (q.to_pg_text(turn_id),
                                                q.to_pg_text(chat_id)), write=False)
        return q.from_pg_text(rows[0][0]) if rows and rows[0][0] is not None else None

    async def list_turns(
        self, chat_id: str, *, limit: int | None = 20, owner: str | None = None
    ) -> tuple[TurnRecord, ...]:
        check_limit(limit)
        params = (q.to_pg_text(chat_id), _opt_pg_text(owner), limit)
        rows = await self._call(q.LIST_TURNS, params, write=False)
        if not rows:
            raise ChatNotFound(chat_id)
        return tuple(q.turn_from_pg(row) for row in rows if row[0] is not None)

    # -- the turn's writes: one function call each -------------------------------------

    async def _begin_keyed(self, chat_id: str, start: TurnStart,
                           params: tuple[Any, ...]) -> asyncpg.Record:
        """A keyed turn's begin (``_postgres_v18``): ``TurnKeyRecorded`` naming the turn
        that holds its key, else the turn taken with its key recorded."""
        cut, key = start.replace_from, start.client_key or ""
        keyed = (*params, None if cut is None else cut if 0 < cut < 2**31 else 0,
                 start.attached, q.to_pg_text(key))
        sql, expect = q.BEGIN_TURN_KEYED, start.expect
        if expect is not None and cut is not None:  # checked first (``_postgres_v19``)
            sql, keyed = q.BEGIN_KEYED_EXPECTED, (
                *keyed, *_expected_message(expect), expect.key_checked,
                _opt_pg_text(expect.key_holder))
        try:
            (row,) = await self._call(sql, keyed, write=True, chat_id=chat_id, seq=cut or 0,
                                      duplicate_turn=start.turn_id)
        except TurnKeyRecorded as exc:
            raise TurnKeyRecorded(chat_id, key, exc.turn_id) from None
        return row

    async def begin_turn(
        self, chat_id: str, start: TurnStart, *, owner: str | None = None
    ) -> TurnLease:
        check_storable(start.turn_id, start.provider, start.model)
        now = self._now()
        lease_expiry(now or utc_now(), start.lease_seconds)  # validates the span
        params = (q.to_pg_text(chat_id), q.to_pg_text(start.turn_id),
                  q.to_pg_json(encode_parts(start.user_parts)), q.to_pg_text(start.provider),
                  q.to_pg_text(start.model), now, timedelta(seconds=start.lease_seconds),
                  _opt_pg_text(owner))
        cut = start.replace_from
        if start.client_key is not None:
            row = await self._begin_keyed(chat_id, start, params)
        elif cut is None:
            (row,) = await self._call(q.BEGIN_TURN_ATTACHED if start.attached
                                      else q.BEGIN_TURN, params, write=True, chat_id=chat_id,
                                      duplicate_turn=start.turn_id)
        else:  # no stored seq lies outside 1..2**31-1, as in ``_change``
            replacing: tuple[Any, ...] = (*params, cut if 0 < cut < 2**31 else 0)
            if start.expect is None:
                sql = q.BEGIN_TURN_REPLACING_ATTACHED if start.attached \
                    else q.BEGIN_TURN_REPLACING
            else:  # the message read checked first (``_postgres_v19``)
                sql = q.BEGIN_REPLACING_ATTACHED_EXPECTED if start.attached \
                    else q.BEGIN_REPLACING_EXPECTED
                replacing = (*replacing, *_expected_message(start.expect))
            (row,) = await self._call(sql, replacing, write=True, chat_id=chat_id, seq=cut,
                                      duplicate_turn=start.turn_id)
        version, seq, expires, reclaimed, reclaimed_expires, epoch = row[:6]
        if reclaimed is not None:
            _log_reclaim(chat_id, q.from_pg_text(reclaimed), reclaimed_expires)
            announce_soon(self, q.from_pg_text(reclaimed))  # its holder stops now
        if cut is not None:
            _LOG.info(CLEAR_LOG, chat_id, "history_deleted")
        user_id, assistant_id = message_ids(start.turn_id)
        return TurnLease(chat_id=chat_id, turn_id=start.turn_id, user_message_id=user_id,
                         assistant_message_id=assistant_id, user_seq=seq,
                         assistant_seq=seq + 1, base_version=version, expires_at=expires,
                         epoch=epoch, user_chars=part_chars(start.user_parts),
                         chat=q.chat_from_pg(row[6:]))

    async def renew_lease(self, lease: TurnLease, lease_seconds: float) -> LeaseRenewal:
        now = self._now()
        lease_expiry(now or utc_now(), lease_seconds)  # validates the span
        params = (q.to_pg_text(lease.chat_id), q.to_pg_text(lease.turn_id), lease.epoch, now,
                  timedelta(seconds=lease_seconds))
        # Idempotent, so retried like a read when the connection drops mid-statement.
        rows = await self._call(q.RENEW_LEASE, params, write=False, chat_id=lease.chat_id)
        if not rows:
            raise LeaseLost(lease.chat_id, lease.turn_id, lease.epoch)
        return LeaseRenewal(expires_at=rows[0][0])

    async def record_transition(
        self, lease: TurnLease, part: TransitionPart, *, clear_provider_state: bool
    ) -> None:
        encoded = encode_parts((part,))[1:-1]
        params = (q.to_pg_text(lease.chat_id), q.to_pg_text(lease.turn_id), lease.epoch,
                  lease.base_version, q.to_pg_json(encoded), clear_provider_state, self._now())
        await self._call(q.RECORD_TRANSITION, params, write=True, chat_id=lease.chat_id,
                         base_version=lease.base_version)
        if clear_provider_state:
            _LOG.info(CLEAR_LOG, lease.chat_id, part.reason)

    async def commit_turn(self, lease: TurnLease, commit: TurnCommit) -> ChatRecord:
        cols = commit_columns(commit)
        params = (q.to_pg_text(lease.chat_id), q.to_pg_text(lease.turn_id), lease.epoch,
                  lease.base_version, q.to_pg_json(cols.parts), q.opt_json(cols.audit),
                  q.opt_json(cols.usage), q.opt_json(cols.provider_state),
                  q.opt_json(cols.context),
                  q.to_pg_text(cols.strategy), q.to_pg_json(cols.path), self._now())
        (row,) = await self._call(q.COMMIT_TURN, params, write=True, chat_id=lease.chat_id,
                                  base_version=lease.base_version)
        return q.chat_from_pg(row)

    async def abort_turn(self, lease: TurnLease, abort: TurnAbort) -> None:
        check_storable(abort.reason, abort.detail, abort.strategy)
        parts = q.to_pg_json(encode_parts(abort.parts)) if abort.parts else None
        params = (q.to_pg_text(lease.chat_id), q.to_pg_text(lease.turn_id), parts,
                  q.to_pg_text(abort.reason), _opt_pg_text(abort.detail),
                  _opt_pg_text(abort.strategy), q.to_pg_json(encode_path(abort.path)),
                  self._now())
        usage, audit = abort_billing(abort)
        if usage is None and audit is None:
            await self._call(q.ABORT_TURN, params, write=True, chat_id=lease.chat_id)
            return
        billed = (*params, q.opt_json(usage), q.opt_json(audit))
        await self._call(q.ABORT_TURN_BILLED, billed, write=True, chat_id=lease.chat_id)

    # -- changes outside turns ---------------------------------------------------------

    async def clear_provider_state(
        self, chat_id: str, *, reason: str, owner: str | None = None
    ) -> None:
        await self._change(chat_id, "clear", 0, None, owner)
        _LOG.info(CLEAR_LOG, chat_id, reason)

    async def edit_message(
        self, chat_id: str, seq: int, parts: Sequence[Part], *, owner: str | None = None,
        expect: ExpectedMessage | None = None,
    ) -> None:
        check_edit_parts(parts)  # media a question could not hold: nothing written
        await self._change(chat_id, "edit", seq, q.to_pg_json(encode_parts(parts)), owner,
                           expect=expect)
        _LOG.info(CLEAR_LOG, chat_id, "history_edited")

    async def delete_message(self, chat_id: str, seq: int, *, owner: str | None = None) -> None:
        await self._change(chat_id, "delete", seq, None, owner)
        _LOG.info(CLEAR_LOG, chat_id, "history_deleted")

    async def delete_messages_from(
        self, chat_id: str, seq: int, *, owner: str | None = None,
        expect: ExpectedMessage | None = None,
    ) -> int:
        deleted = await self._change(chat_id, "delete_from", seq, None, owner, expect=expect)
        _LOG.info(CLEAR_LOG, chat_id, "history_deleted")
        return deleted

    async def _change(self, chat_id: str, kind: str, seq: int, parts: str | None,
                      owner: str | None, *, expect: ExpectedMessage | None = None) -> int:
        # No stored seq lies outside 1..2**31-1: any other asks for a missing message.
        stored_seq = seq if 0 < seq < 2**31 else 0
        params: tuple[Any, ...] = (q.to_pg_text(chat_id), kind, stored_seq, parts,
                                   self._now(), _opt_pg_text(owner))
        sql = q.CHANGE_HISTORY
        if expect is not None:  # compared in the write (``_postgres_v19``)
            sql = q.CHANGE_HISTORY_EXPECTED
            params = (*params, q.to_pg_text(expect.id), expect.status.value,
                      expect.updated_at)
        (row,) = await self._call(sql, params, write=True, chat_id=chat_id, seq=seq)
        deleted: int = row[0]
        return deleted

    async def delete_chat(self, chat_id: str, *, owner: str | None = None) -> None:
        params = (q.to_pg_text(chat_id), self._now(), _opt_pg_text(owner))
        await self._call(q.DELETE_CHAT, params, write=True, chat_id=chat_id)

    # -- the owners' stored bytes (``_postgres_quota``) --------------------------------

    async def storage_used(self, owner: str) -> int:
        (row,) = await self._call(quota.COUNTED, (q.to_pg_text(owner),), write=False)
        return int(row[0])

    async def storage_quota(self) -> int | None:
        (row,) = await self._call(quota.QUOTA, (), write=False)
        return None if row[0] is None else int(row[0])

    async def set_storage_quota(self, max_bytes: int | None) -> None:
        check_quota(max_bytes)
        await self._call(quota.SET_QUOTA, (max_bytes,), write=True)

    async def reclaim_expired(self) -> int:
        rows = await self._call(q.RECLAIM_EXPIRED, (self._now(),), write=True)
        for chat_id, turn_id, expires in rows:
            _log_reclaim(q.from_pg_text(chat_id), q.from_pg_text(turn_id), expires)
        if rows:  # their holders, here or on another node, stop now (lifecycle6)
            await announce_fenced(self, *(q.from_pg_text(row[1]) for row in rows))
        return len(rows)


def _expected_message(expect: CutExpected) -> tuple[str | None, str | None,
                                                    datetime | None]:
    """A cutting begin's message read (id, status, ``updated_at``), or three NULLs."""
    message = expect.message
    if message is None:
        return None, None, None
    return q.to_pg_text(message.id), message.status.value, message.updated_at


def _opt_pg_text(text: str | None) -> str | None:
    return None if text is None else q.to_pg_text(text)


def _log_reclaim(chat_id: str, turn_id: str, expires: datetime) -> None:
    _LOG.warning(RECLAIM_LOG,
                 chat_id, turn_id, expires.isoformat())
