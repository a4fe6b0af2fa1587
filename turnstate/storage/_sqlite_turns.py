"""``SqliteStore``'s turn writes: begin, renew, transition, commit and abort (each a one-statement
fast path where the store knows the chat, else the full transaction), and the reclaim of
expired leases."""

from __future__ import annotations

import functools
import logging
import sqlite3
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from turnstate.core._context import part_chars
from turnstate.core._conversation import TransitionPart
from turnstate.core._errors import (
    ChatBusy,
    ChatNotFound,
    CommitConflict,
    LeaseLost,
    TurnAlreadyRecorded,
    TurnKeyRecorded,
)
from turnstate.core._frozen import slot_maker
from turnstate.storage import _sqlite_edits as edits
from turnstate.storage import _sqlite_sql as q
from turnstate.storage._commit_columns import (
    CommitColumns,
    abort_billing,
    append_part,
    commit_columns,
    media_columns,
    stored_chars,
)
from turnstate.storage._fence_signal import signal_fenced
from turnstate.storage._media_apart import media_apart
from turnstate.storage._protocol import (
    ChatRecord,
    LeaseRenewal,
    TurnAbort,
    TurnCommit,
    TurnLease,
    TurnStart,
)
from turnstate.storage._record_checks import check_storable
from turnstate.storage._records import (
    CLEAR_LOG,
    RECLAIM_LOG,
    encode_parts,
    encode_path,
    format_ts,
    lease_expiry,
    message_ids,
    parse_ts,
)
from turnstate.storage._rows import _chat_record, chat_from_row, committed_chat
from turnstate.storage._sqlite_conn import Conn, SqliteConnection
from turnstate.storage._sqlite_keys import TURN_BY_KEY, record_key
from turnstate.storage._sqlite_media import media_begun
from turnstate.storage._sqlite_quota import insert_refused

_LOG = logging.getLogger("turnstate")

Known = tuple[ChatRecord, int, int]
"""A chat as this store's last write of it left it (its creation or a commit): the
record, the seq of its last message and its lease epoch."""
KNOWN_CHATS = 1024
"""Chats whose last commit a store remembers for the one-statement begin (the oldest
is forgotten first; a forgotten chat's next begin is the full transaction)."""
_BEGIN_POINTS = ("begin:messages", "begin:turn", "begin:lease")
_COMMIT_POINTS = ("commit:chat", "commit:messages", "commit:turn")
_lease: Callable[[str, str, str, str, int, int, int, datetime, int, int | None,
                  ChatRecord | None], TurnLease] = slot_maker(TurnLease)
"""``TurnLease`` without attrs' ``__init__`` (``core._frozen``): one a cursor turn's begin."""


class SqliteTurns(SqliteConnection):
    """``SqliteStore``'s turn writes and the chats it remembers for them (the store is its
    subclass)."""

    @functools.cached_property
    def _known(self) -> dict[str, Known]:
        """The chats this store committed last (``Known``), by id: the one-statement
        begin's guess, which its statement checks against the row (a wrong guess, from
        another process's or this store's other writes, only costs the full begin)."""
        return {}

    # -- the turn's three writes -------------------------------------------------------

    async def begin_turn(
        self, chat_id: str, start: TurnStart, *, owner: str | None = None
    ) -> TurnLease:
        check_storable(start.turn_id, start.provider, start.model)
        clock = self._clock()
        now = format_ts(clock)
        leased_at = clock if self._lease_clock is self._clock else self._lease_clock()
        expiry = lease_expiry(leased_at, start.lease_seconds)
        expires = format_ts(expiry)
        user_parts, blobs = media_apart(start.user_parts)  # the bytes apart (version 12)
        user_id, assistant_id = message_ids(start.turn_id)
        expires_at = expiry if expiry.tzinfo is UTC else parse_ts(expires)
        known = self._known.pop(chat_id, None)
        if known is not None and start.replace_from is None and not blobs \
                and start.client_key is None and (  # a keyed begin: the transaction below
                owner is None or owner == known[0].owner):
            was, last_seq, epoch = known
            seq = last_seq + 1
            if await self._write_one("begin", q.BEGIN_KNOWN_ATTACHED if start.attached
                                     else q.BEGIN_KNOWN, (
                    chat_id, start.turn_id, seq, user_parts, now, user_id, assistant_id,
                    start.provider, start.model, expires, epoch + 1, was.version,
                    was.last_provider_state, was.last_context_state, was.committed_seq,
                    was.history_chars), _BEGIN_POINTS):
                # chat_id, turn_id, user_message_id, assistant_message_id, user_seq,
                # assistant_seq, base_version, expires_at, epoch, user_chars, chat
                return _lease(
                    chat_id, start.turn_id, user_id, assistant_id, seq, seq + 1, was.version,
                    expires_at, epoch + 1, part_chars(start.user_parts),
                    _chat_record(
                        chat_id, was.owner, was.created_at,
                        clock if clock.tzinfo is UTC else parse_ts(now), was.version,
                        was.last_provider_state, was.last_context_state, start.turn_id,
                        expires_at, was.committed_seq, was.history_chars))

        def body(conn: Conn) -> tuple[int, int, list[Any], tuple[str, str] | None]:
            last_seq, epoch, *chat = _begin_row(conn, chat_id, owner, start)
            active, active_expires = chat[7], chat[8]
            reclaimed = None if active is None else (active, active_expires)
            if active is not None and active_expires > format_ts(leased_at):
                raise ChatBusy(chat_id, active)
            cut = start.replace_from
            if cut is not None and conn.execute(q.TURN_RECORDED, (start.turn_id,)).fetchone():
                raise TurnAlreadyRecorded(start.turn_id)  # before the cut's own check
            if active is not None:
                q.reclaim_turn(conn, active, now)
                self._checkpoint("begin:reclaimed")
            if cut is not None:  # MessageNotFound, then delete_messages_from's writes
                edits.delete_from(conn, chat_id, cut, now, None, expect=None if (
                    start.expect is None) else start.expect.message)
                last_seq, epoch, *chat = conn.execute(q.SELECT_FOR_BEGIN,
                                                      (chat_id, chat_id)).fetchone()
                self._checkpoint("begin:cut")
            seq = last_seq + 1
            try:
                conn.execute(q.INSERT_MESSAGES, (user_id, chat_id, seq, user_parts, now, now,
                                               assistant_id, chat_id, seq + 1, now, now))
                media_begun(conn, chat_id, seq, blobs)
                self._checkpoint("begin:messages")
                conn.execute(q.INSERT_TURN_ATTACHED if start.attached else q.INSERT_TURN, (
                    start.turn_id, chat_id, user_id, assistant_id, seq, seq + 1,
                    start.provider, start.model, now))
                record_key(conn, chat_id, start.client_key, start.turn_id)
            except sqlite3.IntegrityError as exc:  # or the owner's quota (``_sqlite_quota``)
                raise insert_refused(exc, chat[1], start.turn_id) from None
            self._checkpoint("begin:turn")
            conn.execute(q.TAKE_LEASE, (start.turn_id, expires, now, epoch + 1, chat_id))
            self._checkpoint("begin:lease")
            # The chat as the take leaves it (nothing else in begin writes the chat).
            chat[3], chat[7], chat[8] = now, start.turn_id, expires
            return seq, epoch + 1, chat, reclaimed

        seq, epoch, chat, reclaimed = await self._write("begin", body)
        if reclaimed is not None:
            _log_reclaim(self, chat_id, *reclaimed)
        if start.replace_from is not None:
            _LOG.info(CLEAR_LOG, chat_id, "history_deleted")
        # The datetimes just formatted, when they are what parsing the texts gives (UTC).
        return TurnLease(chat_id=chat_id, turn_id=start.turn_id, user_message_id=user_id,
                         assistant_message_id=assistant_id, user_seq=seq,
                         assistant_seq=seq + 1, base_version=chat[4],
                         expires_at=expires_at, epoch=epoch,
                         user_chars=part_chars(start.user_parts),
                         chat=chat_from_row(chat, clock if clock.tzinfo is UTC else None,
                                            expires_at))

    async def renew_lease(self, lease: TurnLease, lease_seconds: float) -> LeaseRenewal:
        expires = format_ts(lease_expiry(self._lease_clock(), lease_seconds))
        params = (expires, lease.chat_id, lease.turn_id, lease.epoch)

        def body(conn: Conn) -> int:
            renewed: int = conn.execute(q.RENEW_LEASE, params).rowcount
            return renewed

        if not await self._write("renew", body):
            raise LeaseLost(lease.chat_id, lease.turn_id, lease.epoch)
        return LeaseRenewal(expires_at=parse_ts(expires))

    async def record_transition(
        self, lease: TurnLease, part: TransitionPart, *, clear_provider_state: bool
    ) -> None:
        now = self._now()

        def body(conn: Conn) -> None:
            row = conn.execute(q.SELECT_FOR_TRANSITION, (
                lease.assistant_seq, lease.assistant_message_id, lease.chat_id)).fetchone()
            if row is None:
                raise ChatNotFound(lease.chat_id)
            version, active, status, parts, epoch = row
            if active != lease.turn_id or epoch != lease.epoch or status != "in_progress":
                raise CommitConflict(lease.chat_id, lease.base_version, version)
            conn.execute(q.SET_PARTS, (append_part(parts, part), now, lease.chat_id,
                                       lease.assistant_seq))
            self._checkpoint("transition:appended")
            if clear_provider_state:
                conn.execute(q.CLEAR_CURSOR, (now, lease.chat_id))
                self._checkpoint("transition:cleared")

        await self._write("transition", body)
        if clear_provider_state:
            _LOG.info(CLEAR_LOG, lease.chat_id, part.reason)

    async def commit_turn(self, lease: TurnLease, commit: TurnCommit) -> ChatRecord:
        columns, blobs = media_columns(commit_columns(commit), commit)  # (version 12)
        clock = self._clock()
        leased = lease.chat
        if leased is not None and lease.user_chars is not None and not blobs:
            now = format_ts(clock)
            chars = columns.chars + lease.user_chars
            if await self._write_one("commit", q.COMMIT_KNOWN, (
                    lease.chat_id, lease.base_version, lease.turn_id, lease.epoch,
                    leased.history_chars, chars, columns.provider_state, columns.context,
                    lease.user_seq, lease.assistant_seq, lease.user_message_id,
                    lease.assistant_message_id, columns.parts, columns.audit, columns.usage,
                    columns.strategy, columns.path, now), _COMMIT_POINTS):
                chat = committed_chat(leased, lease, columns, chars=chars,
                                      updated_at=clock if clock.tzinfo is UTC else parse_ts(now))
                self._remember(chat, lease.assistant_seq, lease.epoch)
                return chat
        return await self._write("commit", lambda conn: self._commit(conn, lease, columns,
                                                                     clock, blobs))

    def _remember(self, chat: ChatRecord, last_seq: int, epoch: int) -> None:
        """Keep the chat a write of this store left (a creation or a commit), for the
        next begin's one statement (``_known``)."""
        known = self._known
        known[chat.id] = (chat, last_seq, epoch)
        if len(known) > KNOWN_CHATS:
            del known[next(iter(known))]

    def _commit(self, conn: Conn, lease: TurnLease, cols: CommitColumns,
                clock: datetime, blobs: list[bytes]) -> ChatRecord:
        now = format_ts(clock)
        chars = cols.chars + self._user_chars(conn, lease)
        chat = _commit_chat(conn, lease, cols, chars=chars, clock=clock, now=now)
        self._checkpoint("commit:chat")
        done = q.commit_messages(conn, cols, now, chat_id=lease.chat_id,
                                 seqs=(lease.user_seq, lease.assistant_seq),
                                 ids=(lease.user_message_id, lease.assistant_message_id))
        self._checkpoint("commit:messages")
        if done != 2:
            raise CommitConflict(lease.chat_id, lease.base_version, lease.base_version)
        media_begun(conn, lease.chat_id, lease.assistant_seq, blobs)
        conn.execute(q.COMMIT_TURN, (cols.strategy, cols.path, now, lease.turn_id))
        self._checkpoint("commit:turn")
        return chat

    @staticmethod
    def _user_chars(conn: Conn, lease: TurnLease) -> int:
        """The user's message's count: begin's (on the lease), or read from the row."""
        if lease.user_chars is not None:
            return lease.user_chars
        user = conn.execute(q.SELECT_USER_PARTS, (lease.chat_id, lease.user_seq,
                                                  lease.user_message_id)).fetchone()
        return stored_chars(user[0]) if user is not None else 0

    async def abort_turn(self, lease: TurnLease, abort: TurnAbort) -> None:
        check_storable(abort.reason, abort.detail, abort.strategy)
        parts = encode_parts(abort.parts) if abort.parts else None
        path = encode_path(abort.path)
        usage, audit = abort_billing(abort)
        now = self._now()

        def body(conn: Conn) -> None:
            # Only what is still this turn's: a reclaimed turn was already aborted, and
            # the chat may by now be leased to another turn.
            row = conn.execute("SELECT 1 FROM chats WHERE id = ?", (lease.chat_id,)).fetchone()
            if row is None:
                raise ChatNotFound(lease.chat_id)
            conn.execute(q.ABORT_USER, (now, lease.chat_id, lease.user_seq,
                                        lease.user_message_id))
            self._checkpoint("abort:user")
            conn.execute(q.ABORT_ASSISTANT, (parts, usage, audit, now, lease.chat_id,
                                             lease.assistant_seq, lease.assistant_message_id))
            if audit is not None:  # over a reclaimed answer's marker, else nothing
                conn.execute(q.BILL_RECLAIMED, (usage, audit, lease.chat_id,
                                                lease.assistant_seq, lease.assistant_message_id))
            self._checkpoint("abort:assistant")
            conn.execute(q.ABORT_TURN, (abort.reason, abort.detail, abort.strategy, path, now,
                                      lease.turn_id))
            self._checkpoint("abort:turn")
            conn.execute(q.RELEASE_HELD, (now, lease.chat_id, lease.turn_id))
            self._checkpoint("abort:lease")

        await self._write("abort", body)

    async def reclaim_expired(self) -> int:
        now, leased_at = self._now(), self._lease_now()
        sql = """SELECT id, active_turn_id, active_turn_expires_at FROM chats
            WHERE active_turn_id IS NOT NULL AND active_turn_expires_at <= ?"""

        def body(conn: Conn) -> list[tuple[str, str, str]]:
            expired: list[tuple[str, str, str]] = conn.execute(sql, (leased_at,)).fetchall()
            for chat_id, turn_id, _ in expired:
                q.reclaim_turn(conn, turn_id, now)
                conn.execute(q.RELEASE_LEASE, (now, chat_id))
            return expired

        expired = await self._write("reclaim", body)
        for chat_id, turn_id, expires in expired:
            _log_reclaim(self, chat_id, turn_id, expires)
        return len(expired)


def _commit_chat(conn: Conn, lease: TurnLease, cols: CommitColumns, *, chars: int,
                 clock: datetime, now: str) -> ChatRecord:
    """The guarded chat update of a commit (the version and lease check: no row, no
    commit); the chat as it leaves it. A lease carrying begin's chat takes the update
    that returns nothing (``COMMIT_LEASED_CHAT``), anything else the one that returns the
    row (``COMMIT_CHAT``)."""
    params = (cols.provider_state, cols.context, lease.assistant_seq, chars, now,
              lease.chat_id, lease.base_version, lease.turn_id, lease.epoch)
    updated = clock if clock.tzinfo is UTC else None  # what parsing ``now`` gives
    leased = lease.chat
    if leased is not None and conn.execute(q.COMMIT_LEASED_CHAT,
                                           (*params, leased.history_chars)).rowcount:
        return committed_chat(leased, lease, cols, chars=chars,
                              updated_at=parse_ts(now) if updated is None else updated)
    rows = conn.execute(q.COMMIT_CHAT, params).fetchall()
    if not rows:
        raise q.conflict_for(conn, lease)
    return chat_from_row(rows[0], updated)


def _log_reclaim(store: object, chat_id: str, turn_id: str, expires: str) -> None:
    """A reclaim logged, and signalled to the turn's holder if it runs here (it stops
    now, not at its next renewal)."""
    _LOG.warning(RECLAIM_LOG,
                 chat_id, turn_id, expires)
    signal_fenced(store, turn_id)


def _begin_row(conn: Conn, chat_id: str, owner: str | None, start: TurnStart) -> list[Any]:
    """Begin's read of the chat (``SELECT_FOR_BEGIN``): ``ChatNotFound`` for a missing or
    another owner's chat, then ``TurnKeyRecorded`` when a turn of it holds the key
    (``_sqlite_keys``; before the busy check, so a retry of the running turn names it)."""
    row = conn.execute(q.SELECT_FOR_BEGIN, (chat_id, chat_id)).fetchone()
    if row is None or (owner is not None and row[3] != owner):
        raise ChatNotFound(chat_id)
    key, cut = start.client_key, start.replace_from
    if key is not None and start.expect is not None:  # taken over only from the turn read
        held = conn.execute(TURN_BY_KEY, (chat_id, key, None, None)).fetchone()
        start.expect.check_holder(chat_id, key, None if held is None else held[0])
    if key is not None and (found := conn.execute(TURN_BY_KEY, (chat_id, key, cut, cut))
                            .fetchone()):
        raise TurnKeyRecorded(chat_id, key, found[0])
    return list(row)
