"""``MemoryStore``: the reference Store, rows in dictionaries, nothing on disk.

It keeps every row as the same column values ``SqliteStore`` writes (serialised JSON
text, fixed-width UTC timestamps), so tests can check invariants on its stored bytes,
and the conformance suite holds both backends to the same behaviour. A method never
awaits, so each one is atomic with respect to other tasks; each checks everything
before it changes anything, so a raised error leaves the rows as they were.

Where the protocol leaves room, both backends behave like this (the conformance suite
and a differential property test hold them to it):

- a turn's message ids are ``<turn id>:user`` and ``<turn id>:assistant``; seqs start at
  1 and a turn takes the next two after the highest stored seq;
- a lease has expired when ``expires_at <= now``; ``record_transition`` or
  ``commit_turn`` with a lease the chat no longer holds raise ``CommitConflict`` and
  write nothing; ``abort_turn`` then only marks what is still the turn's;
- ``abort_turn`` with no parts keeps the parts the turn already stored (its transition);
- every write to a chat row sets its ``updated_at`` (begin too); ``list_chats`` breaks
  ties by id, descending; ``list_turns`` is newest begun first;
- deleting a message leaves its turn's record (its message id becomes NULL).
"""

from __future__ import annotations

import logging
import operator
import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from turnstate.core._context import part_chars
from turnstate.core._conversation import Message, MessageStatus, Part, TransitionPart
from turnstate.core._errors import (
    ChatBusy,
    ChatLimitReached,
    ChatNotFound,
    CommitConflict,
    ConfigurationError,
    LeaseLost,
    MessageNotFound,
    StorageError,
    TurnAlreadyRecorded,
    TurnNotFound,
)
from turnstate.core._frozen import slot_maker
from turnstate.storage._chat_search import check_query, matches
from turnstate.storage._commit_columns import (
    abort_billing,
    append_part,
    commit_columns,
    stored_chars,
)
from turnstate.storage._lean import lean_message_from_row
from turnstate.storage._lean_message import LeanMessage
from turnstate.storage._memory_log import MemoryTurnLog
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
from turnstate.storage._records import (
    CLEAR_LOG,
    LEASE_EXPIRED,
    RECLAIM_LOG,
    Clock,
    check_limit,
    check_new_chat,
    check_storable,
    check_title,
    encode_parts,
    encode_path,
    format_ts,
    lease_expiry,
    message_ids,
    parse_ts,
    utc_now,
)
from turnstate.storage._rows import (
    CHAT_COLUMNS,
    MESSAGE_COLUMNS,
    TURN_COLUMNS,
    chat_from_row,
    message_from_row,
    turn_from_row,
)
from turnstate.storage._window import check_window, select_window

_LOG = logging.getLogger("turnstate")

Row = dict[str, Any]

_IN_PROGRESS = MessageStatus.IN_PROGRESS.value
_COMPLETED = MessageStatus.COMPLETED.value
_ABORTED = MessageStatus.ABORTED.value


# A row's values in its table's column order, in one C call each (issue 26: a generator
# over the columns was 13 Python calls per record, two records per turn).
_chat_values = operator.itemgetter(*CHAT_COLUMNS)
_message_values = operator.itemgetter(*MESSAGE_COLUMNS)
_turn_values = operator.itemgetter(*TURN_COLUMNS)
# begin's lease without attrs' __init__ (core._frozen)
_lease: Callable[[str, str, str, str, int, int, int, datetime, int, int | None,
                  ChatRecord | None], TurnLease] = slot_maker(TurnLease)


class MemoryStore:
    """A Store in process memory: the reference backend and the engine tests' default.

    Args:
        clock: returns the current time (aware; naive values are taken as UTC).
    """

    def __init__(self, *, clock: Clock | None = None) -> None:
        self._clock = clock or utc_now
        self._chats: dict[str, Row] = {}
        self._messages: dict[str, Row] = {}
        self._by_seq: dict[str, dict[int, Row]] = {}  # chat id -> seq -> row, seq order
        self._turns: dict[str, Row] = {}  # insertion order is begin order
        self._chat_turns: dict[str, list[str]] = {}
        self._titles: dict[str, str] = {}  # chat id -> the title rename_chat set
        self.turn_log = MemoryTurnLog(turns=self._turns, chats=self._chats, clock=self._clock)

    # -- raw rows, for invariant checks ------------------------------------------------

    def raw_chat_state(self, chat_id: str) -> str | None:
        """The stored text of ``chats.last_provider_state`` (ChatNotFound if unknown)."""
        state: str | None = self._chat_row(chat_id)["last_provider_state"]
        return state

    def raw_rows(self, table: str) -> tuple[Row, ...]:
        """Copies of every stored row of ``chats``, ``messages`` or ``turns``."""
        tables = {"chats": self._chats, "messages": self._messages, "turns": self._turns}
        if table not in tables:
            msg = f"unknown table {table!r}"
            raise ConfigurationError(msg)
        return tuple(dict(row) for row in tables[table].values())

    # -- chats and reads ---------------------------------------------------------------

    async def create_chat(self, *, owner: str, chat_id: str | None = None,
                          max_chats: int | None = None) -> ChatRecord:
        chat_id = uuid.uuid4().hex if chat_id is None else chat_id
        check_new_chat(chat_id, owner, max_chats)
        if chat_id in self._chats:
            msg = f"chat {chat_id!r} already exists"
            raise StorageError(msg)
        if max_chats is not None and sum(
                row["owner"] == owner for row in self._chats.values()) >= max_chats:
            raise ChatLimitReached(owner, max_chats)
        now = self._now()
        row: Row = dict.fromkeys(CHAT_COLUMNS)
        row.update(id=chat_id, owner=owner, created_at=now, updated_at=now, version=0,
                   history_chars=0, lease_epoch=0)
        self._chats[chat_id] = row
        self._by_seq[chat_id] = {}
        self._chat_turns[chat_id] = []
        return self._record(row)

    async def load_chat(self, chat_id: str, *, owner: str | None = None) -> ChatRecord:
        return self._record(self._chat_row(chat_id, owner))

    async def rename_chat(self, chat_id: str, title: str | None, *,
                          owner: str | None = None) -> None:
        check_title(title)
        self._chat_row(chat_id, owner)
        if title is None:
            self._titles.pop(chat_id, None)
        else:
            self._titles[chat_id] = title

    async def chat_titles(self, chat_ids: Sequence[str], *,
                          owner: str) -> dict[str, str]:
        return {chat_id: self._titles[chat_id] for chat_id in chat_ids
                if chat_id in self._titles and self._chats[chat_id]["owner"] == owner}

    async def list_chats(
        self, owner: str, *, limit: int | None = None, after: ChatPosition | None = None
    ) -> tuple[ChatRecord, ...]:
        check_limit(limit)
        rows = [row for row in self._chats.values() if row["owner"] == owner]
        if after is not None:
            mark = (format_ts(after.updated_at), after.id)
            rows = [row for row in rows if (row["updated_at"], row["id"]) < mark]
        rows.sort(key=lambda row: (row["updated_at"], row["id"]), reverse=True)
        return tuple(self._record(row) for row in rows[:limit])

    async def search_chats(
        self, owner: str, query: str, *, limit: int | None = None,
        after: ChatPosition | None = None,
    ) -> tuple[ChatRecord, ...]:
        check_limit(limit)
        needle = check_query(query)
        page = await self.list_chats(owner, after=after)
        return tuple(chat for chat in page if matches(
            self._titles.get(chat.id), next((row["parts"] for row in self._by_seq[chat.id].values()
                                             if row["role"] == "user"), None), needle))[:limit]

    async def load_history(
        self, chat_id: str, *, owner: str | None = None
    ) -> tuple[Message, ...]:
        return tuple(message_from_row(_message_values(row))
                     for row in self._chat_messages(chat_id, owner)
                     if row["status"] == _COMPLETED)

    async def list_messages(
        self, chat_id: str, *, owner: str | None = None
    ) -> tuple[Message, ...]:
        return tuple(message_from_row(_message_values(row))
                     for row in self._chat_messages(chat_id, owner))

    async def load_messages(
        self, chat_id: str, *, limit: int, before_seq: int | None = None,
        after_seq: int | None = None, owner: str | None = None,
    ) -> MessageWindow:
        shown, more, total, turns = self._window(chat_id, limit, before_seq, after_seq, owner)
        return MessageWindow(
            messages=[message_from_row(_message_values(row)) for row in shown],
            more=more, total=total, turns=turns)

    async def load_messages_lean(
        self, chat_id: str, *, limit: int, before_seq: int | None = None,
        after_seq: int | None = None, owner: str | None = None,
    ) -> LeanWindow:
        shown, more, total, turns = self._window(chat_id, limit, before_seq, after_seq, owner)
        return LeanWindow(
            messages=[lean_message_from_row(_message_values(row)) for row in shown],
            more=more, total=total, turns=turns)

    async def list_messages_lean(
        self, chat_id: str, *, owner: str | None = None
    ) -> tuple[LeanMessage, ...]:
        return tuple(lean_message_from_row(_message_values(row))
                     for row in self._chat_messages(chat_id, owner))

    def _window(self, chat_id: str, limit: int, before_seq: int | None,
                after_seq: int | None, owner: str | None
                ) -> tuple[list[Row], bool, int, list[TurnRecord]]:
        """``load_messages``' rows, whether more lie beyond, the count and the turns."""
        check_window(limit, before_seq, after_seq)
        rows = self._chat_messages(chat_id, owner)
        shown, more = select_window(rows, [row["seq"] for row in rows], limit, before_seq,
                                    after_seq)
        ids = {row["id"] for row in shown}
        turns = [self._turns[t] for t in self._chat_turns[chat_id]]
        return shown, more, len(rows), [turn_from_row(_turn_values(t)) for t in turns
                                        if t["assistant_message_id"] in ids]

    async def load_turn(self, turn_id: str) -> TurnRecord:
        row = self._turns.get(turn_id)
        if row is None:
            raise TurnNotFound(turn_id)
        return turn_from_row(_turn_values(row))

    async def list_turns(
        self, chat_id: str, *, limit: int | None = 20, owner: str | None = None
    ) -> tuple[TurnRecord, ...]:
        self._chat_row(chat_id, owner)
        check_limit(limit)
        ids = self._chat_turns[chat_id][::-1][:limit]
        return tuple(turn_from_row(_turn_values(self._turns[i])) for i in ids)

    # -- the turn's three writes -------------------------------------------------------

    async def begin_turn(
        self, chat_id: str, start: TurnStart, *, owner: str | None = None
    ) -> TurnLease:
        check_storable(start.turn_id, start.provider, start.model)
        clock = self._clock()
        now = format_ts(clock)
        expiry = lease_expiry(clock, start.lease_seconds)
        expires = format_ts(expiry)
        chat = self._chat_row(chat_id, owner)
        active = chat["active_turn_id"]
        if active is not None and chat["active_turn_expires_at"] > now:
            raise ChatBusy(chat_id, active)
        user_id, assistant_id = message_ids(start.turn_id)
        if start.turn_id in self._turns or user_id in self._messages:
            raise TurnAlreadyRecorded(start.turn_id)
        user_parts = encode_parts(start.user_parts)
        cut = start.replace_from
        if cut is not None:
            self._message_at(chat_id, cut)  # MessageNotFound, the last check
        if active is not None:
            self._reclaim(chat, now)
        if cut is not None:
            self._cut(chat, cut, now)
        messages = self._by_seq[chat_id]
        user_seq = next(reversed(messages), 0) + 1  # rows are kept in seq order
        # Rows as dict displays in their tables' column orders (``MESSAGE_COLUMNS``,
        # ``TURN_COLUMNS``; tested): a third of ``dict.fromkeys`` and an ``update``.
        for message_id, seq, role, parts in ((user_id, user_seq, "user", user_parts),
                                             (assistant_id, user_seq + 1, "assistant", "[]")):
            row: Row = {"id": message_id, "chat_id": chat_id, "seq": seq, "role": role,
                        "status": _IN_PROGRESS, "parts": parts, "provider_state": None,
                        "usage": None, "created_at": now, "updated_at": now}
            self._messages[message_id] = messages[seq] = row
        turn: Row = {"id": start.turn_id, "chat_id": chat_id, "user_message_id": user_id,
                     "assistant_message_id": assistant_id, "user_seq": user_seq,
                     "assistant_seq": user_seq + 1, "status": _IN_PROGRESS,
                     "provider": start.provider, "model": start.model, "strategy": None,
                     "reason": None, "detail": None, "path": "[]", "started_at": now,
                     "ended_at": None}
        self._turns[start.turn_id] = turn
        self._chat_turns[chat_id].append(start.turn_id)
        epoch = chat["lease_epoch"] + 1
        chat.update(active_turn_id=start.turn_id, active_turn_expires_at=expires, updated_at=now,
                    lease_epoch=epoch)
        # The record takes the datetimes just formatted when they are what parsing the
        # texts back gives (UTC-aware, as the store's clocks give them): no parse.
        updated = clock if clock.tzinfo is UTC else None
        expires_at = expiry if expiry.tzinfo is UTC else parse_ts(expires)
        # chat_id, turn_id, user_message_id, assistant_message_id, user_seq,
        # assistant_seq, base_version, expires_at, epoch, user_chars, chat
        return _lease(chat_id, start.turn_id, user_id, assistant_id, user_seq, user_seq + 1,
                      chat["version"], expires_at, epoch, part_chars(start.user_parts),
                      self._record(chat, updated, expires_at))

    async def renew_lease(self, lease: TurnLease, lease_seconds: float) -> LeaseRenewal:
        clock = self._clock()
        expires = format_ts(lease_expiry(clock, lease_seconds))
        chat = self._chats.get(lease.chat_id)  # a deleted chat is held by no lease
        if chat is None or not self._holds(chat, lease):
            raise LeaseLost(lease.chat_id, lease.turn_id, lease.epoch)
        chat.update(active_turn_expires_at=expires)
        return LeaseRenewal(expires_at=parse_ts(expires))

    def _holds(self, chat: Row, lease: TurnLease) -> bool:
        """The fence: the chat is held by this lease's turn, at this lease's epoch."""
        held: bool = (chat["active_turn_id"] == lease.turn_id
                      and chat["lease_epoch"] == lease.epoch)
        return held

    async def record_transition(
        self, lease: TurnLease, part: TransitionPart, *, clear_provider_state: bool
    ) -> None:
        now = self._now()
        chat = self._chat_row(lease.chat_id)
        message = self._messages.get(lease.assistant_message_id)
        if (not self._holds(chat, lease) or message is None
                or message["status"] != _IN_PROGRESS):
            raise CommitConflict(lease.chat_id, lease.base_version, chat["version"])
        message.update(parts=append_part(message["parts"], part), updated_at=now)
        if clear_provider_state:
            chat.update(last_provider_state=None, updated_at=now)
            _LOG.info(CLEAR_LOG, lease.chat_id, part.reason)

    async def commit_turn(self, lease: TurnLease, commit: TurnCommit) -> ChatRecord:
        columns = commit_columns(commit)
        clock = self._clock()
        now = format_ts(clock)
        chat = self._chat_row(lease.chat_id)
        assistant = self._messages.get(lease.assistant_message_id)
        user = self._messages.get(lease.user_message_id)
        if (not self._holds(chat, lease) or chat["version"] != lease.base_version
                or assistant is None or user is None
                or assistant["status"] != _IN_PROGRESS or user["status"] != _IN_PROGRESS):
            raise CommitConflict(lease.chat_id, lease.base_version, chat["version"])
        chars = chat["history_chars"] + columns.chars + (
            stored_chars(user["parts"]) if lease.user_chars is None else lease.user_chars)
        assistant.update(status=_COMPLETED, parts=columns.parts, provider_state=columns.audit,
                         usage=columns.usage, updated_at=now)
        user.update(status=_COMPLETED, updated_at=now)
        self._turns[lease.turn_id].update(status=_COMPLETED, strategy=columns.strategy,
                                          path=columns.path, ended_at=now)
        chat.update(last_provider_state=columns.provider_state,
                    last_context_state=columns.context, active_turn_id=None,
                    active_turn_expires_at=None, version=chat["version"] + 1, updated_at=now,
                    committed_seq=lease.assistant_seq, history_chars=chars)
        return self._record(chat, clock if clock.tzinfo is UTC else None)

    async def abort_turn(self, lease: TurnLease, abort: TurnAbort) -> None:
        check_storable(abort.reason, abort.detail, abort.strategy)
        parts = encode_parts(abort.parts) if abort.parts else None
        path = encode_path(abort.path)
        usage, audit = abort_billing(abort)
        now = self._now()
        chat = self._chat_row(lease.chat_id)
        # Only what is still this turn's: a reclaimed turn was already aborted, and the
        # chat may by now be leased to another turn.
        user = self._messages.get(lease.user_message_id)
        if user is not None and user["status"] == _IN_PROGRESS:
            user.update(status=_ABORTED, updated_at=now)
        assistant = self._messages.get(lease.assistant_message_id)
        if assistant is not None and assistant["status"] == _IN_PROGRESS:
            assistant.update(status=_ABORTED, parts=parts or assistant["parts"], updated_at=now,
                             usage=usage or assistant["usage"],
                             provider_state=audit or assistant["provider_state"])
        turn = self._turns.get(lease.turn_id)
        if turn is not None and turn["status"] == _IN_PROGRESS:
            turn.update(status=_ABORTED, reason=abort.reason, detail=abort.detail,
                        strategy=abort.strategy or turn["strategy"], path=path, ended_at=now)
        if chat["active_turn_id"] == lease.turn_id:  # a turn takes its chat once
            chat.update(active_turn_id=None, active_turn_expires_at=None, updated_at=now)

    # -- changes outside turns ---------------------------------------------------------

    async def clear_provider_state(
        self, chat_id: str, *, reason: str, owner: str | None = None
    ) -> None:
        self._bump(self._chat_row(chat_id, owner), self._now())
        _LOG.info(CLEAR_LOG, chat_id, reason)

    async def edit_message(
        self, chat_id: str, seq: int, parts: Sequence[Part], *, owner: str | None = None
    ) -> None:
        encoded = encode_parts(parts)
        now = self._now()
        chat = self._chat_row(chat_id, owner)  # owner, live lease, message: as the SQL
        self._refuse_live_lease(chat, now)  # stores check them
        message = self._message_at(chat_id, seq)
        if message["status"] == _COMPLETED:
            chat["history_chars"] += part_chars(parts) - stored_chars(message["parts"])
        message.update(parts=encoded, updated_at=now)
        self._bump(chat, now)
        _LOG.info(CLEAR_LOG, chat_id, "history_edited")

    async def delete_message(self, chat_id: str, seq: int, *, owner: str | None = None) -> None:
        now = self._now()
        chat = self._chat_row(chat_id, owner)
        self._refuse_live_lease(chat, now)
        self._drop_messages(chat_id, [self._message_at(chat_id, seq)])
        self._bump(chat, now)
        _LOG.info(CLEAR_LOG, chat_id, "history_deleted")

    async def delete_messages_from(
        self, chat_id: str, seq: int, *, owner: str | None = None
    ) -> int:
        now = self._now()
        chat = self._chat_row(chat_id, owner)  # owner, then live lease, then message,
        self._refuse_live_lease(chat, now)  # the order the SQL stores check them in
        self._message_at(chat_id, seq)
        return self._cut(chat, seq, now)

    async def delete_chat(self, chat_id: str, *, owner: str | None = None) -> None:
        chat = self._chat_row(chat_id, owner)
        self._refuse_live_lease(chat, self._now())
        for row in self._by_seq.pop(chat_id).values():
            del self._messages[row["id"]]
        for turn_id in self._chat_turns.pop(chat_id):
            del self._turns[turn_id]
        del self._chats[chat_id]
        self._titles.pop(chat_id, None)

    async def reclaim_expired(self) -> int:
        now = self._now()
        expired = [chat for chat in self._chats.values()
                   if chat["active_turn_id"] is not None
                   and chat["active_turn_expires_at"] <= now]
        for chat in expired:
            self._reclaim(chat, now)
            chat.update(updated_at=now)
        return len(expired)

    # -- helpers -----------------------------------------------------------------------

    def _now(self) -> str:
        return format_ts(self._clock())

    def _record(self, row: Row, updated: datetime | None = None,
                expires: datetime | None = None) -> ChatRecord:
        """The chat's record (``updated``, ``expires``: as ``chat_from_row`` takes them)."""
        return chat_from_row(_chat_values(row), updated, expires)

    def _chat_row(self, chat_id: str, owner: str | None = None) -> Row:
        row = self._chats.get(chat_id)
        if row is None or (owner is not None and row["owner"] != owner):
            raise ChatNotFound(chat_id)
        return row

    def _chat_messages(self, chat_id: str, owner: str | None = None) -> list[Row]:
        self._chat_row(chat_id, owner)
        return list(self._by_seq[chat_id].values())

    @staticmethod
    def _refuse_live_lease(chat: Row, now: str) -> None:
        active = chat["active_turn_id"]
        if active is not None and chat["active_turn_expires_at"] > now:
            raise ChatBusy(chat["id"], active)

    def _drop_messages(self, chat_id: str, rows: list[Row]) -> None:
        """Delete ``rows``; the committed ones leave the chat's counters."""
        gone = {row["id"] for row in rows}
        committed = [row for row in rows if row["status"] == _COMPLETED]
        chars = sum(stored_chars(row["parts"]) for row in committed)  # before any change
        for row in rows:
            del self._by_seq[chat_id][row["seq"]]
            del self._messages[row["id"]]
        for turn_id in self._chat_turns[chat_id]:  # ON DELETE SET NULL, as in SQLite
            turn = self._turns[turn_id]
            for column in ("user_message_id", "assistant_message_id"):
                if turn[column] in gone:
                    turn[column] = None
        if committed:
            chat = self._chats[chat_id]
            chat["history_chars"] -= chars
            chat["committed_seq"] = next((row["seq"] for row in reversed(
                self._by_seq[chat_id].values()) if row["status"] == _COMPLETED), None)

    def _cut(self, chat: Row, seq: int, now: str) -> int:
        """Delete the messages from ``seq`` on (checked: there is one at ``seq``), clear
        the cursor and bump the version; how many went (``delete_messages_from`` and a
        begin that replaces)."""
        chat_id = chat["id"]
        doomed = [row for at, row in self._by_seq[chat_id].items() if at >= seq]
        self._drop_messages(chat_id, doomed)
        self._bump(chat, now)
        _LOG.info(CLEAR_LOG, chat_id, "history_deleted")
        return len(doomed)

    def _message_at(self, chat_id: str, seq: int) -> Row:
        row = self._by_seq[chat_id].get(seq)
        if row is None:
            raise MessageNotFound(chat_id, seq)
        return row

    @staticmethod
    def _bump(chat: Row, now: str) -> None:
        chat.update(last_provider_state=None, version=chat["version"] + 1, updated_at=now)

    def _reclaim(self, chat: Row, now: str) -> None:
        turn = self._turns[chat["active_turn_id"]]
        _LOG.warning(RECLAIM_LOG,
                     chat["id"], turn["id"], chat["active_turn_expires_at"])
        for column in ("user_message_id", "assistant_message_id"):
            message = self._messages.get(turn[column]) if turn[column] else None
            if message is not None and message["status"] == _IN_PROGRESS:
                message.update(status=_ABORTED, updated_at=now)
        if turn["status"] == _IN_PROGRESS:
            turn.update(status=_ABORTED, reason=LEASE_EXPIRED, ended_at=now)
        chat.update(active_turn_id=None, active_turn_expires_at=None)
