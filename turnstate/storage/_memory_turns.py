"""The ``MemoryStore``'s turn writes: begin, renew, transition, commit, abort and the
reclaim of expired leases."""

from __future__ import annotations

from datetime import UTC

from turnstate.core._context import part_chars
from turnstate.core._conversation import TransitionPart
from turnstate.core._errors import (
    ChatBusy,
    CommitConflict,
    LeaseLost,
    TurnAlreadyRecorded,
    TurnKeyRecorded,
)
from turnstate.storage._commit_columns import (
    abort_billing,
    append_part,
    commit_columns,
    stored_chars,
)
from turnstate.storage._memory_quota import message_bytes
from turnstate.storage._memory_rows import (
    _ABORTED,
    _COMPLETED,
    _IN_PROGRESS,
    _LOG,
    MemoryRows,
    Row,
    _lease,
)
from turnstate.storage._protocol import (
    ChatRecord,
    LeaseRenewal,
    TurnAbort,
    TurnCommit,
    TurnLease,
    TurnStart,
)
from turnstate.storage._quota import text_bytes
from turnstate.storage._reclaimed import is_reclaimed
from turnstate.storage._record_checks import check_storable
from turnstate.storage._records import (
    CLEAR_LOG,
    encode_parts,
    encode_path,
    format_ts,
    lease_expiry,
    message_ids,
    parse_ts,
)


class MemoryTurns(MemoryRows):
    """``MemoryStore``'s turn writes (each checks everything before it changes anything)."""

    # -- the turn's three writes -------------------------------------------------------

    async def keyed_turn(self, chat_id: str, key: str) -> str | None:
        """The id of the turn of ``chat_id`` whose question, still held, was asked with
        the client key ``key`` (``TurnStart.client_key``), or None (the caller checks the
        chat's owner)."""
        return self._key_holder(chat_id, key, None)

    async def turn_key(self, chat_id: str, turn_id: str) -> str | None:
        """The client key turn ``turn_id`` of ``chat_id`` was asked with and holds (None:
        none, taken since by another turn, or no such turn of that chat; the caller checks
        the chat's owner): a regenerate's turn takes its question's key over (edits10)."""
        turn = self._turns.get(turn_id)
        return None if turn is None or turn["chat_id"] != chat_id else turn["client_key"]

    def _key_holder(self, chat_id: str, key: str, cut: int | None) -> str | None:
        """A scan of the chat's turns, only for a keyed begin or lookup: a turn whose
        question was deleted, or is cut by this begin, holds its key no more."""
        for turn_id in self._chat_turns.get(chat_id, ()):
            turn = self._turns[turn_id]
            if turn["client_key"] == key and turn["user_message_id"] is not None \
                    and (cut is None or turn["user_seq"] < cut):
                return turn_id
        return None

    def _refuse_key(self, chat_id: str, key: str, cut: int | None) -> None:
        """``TurnKeyRecorded`` when a turn of the chat holds ``key`` (``_key_holder``)."""
        holder = self._key_holder(chat_id, key, cut)
        if holder is not None:
            raise TurnKeyRecorded(chat_id, key, holder)

    def _take_key(self, chat_id: str, key: str) -> None:
        """The key taken from the turns that held it (their questions are gone)."""
        for turn_id in self._chat_turns[chat_id]:
            if self._turns[turn_id]["client_key"] == key:
                self._turns[turn_id]["client_key"] = None

    async def begin_turn(
        self, chat_id: str, start: TurnStart, *, owner: str | None = None
    ) -> TurnLease:
        check_storable(start.turn_id, start.provider, start.model)
        clock = self._clock()
        now = format_ts(clock)
        leased_at = clock if self._lease_clock is self._clock else self._lease_clock()
        expiry = lease_expiry(leased_at, start.lease_seconds)
        expires = format_ts(expiry)
        chat = self._chat_row(chat_id, owner)
        key, expect = start.client_key, start.expect
        if key is not None:  # before the busy check: a retry of the running turn too
            if expect is not None:  # the key taken over only from the turn read
                expect.check_holder(chat_id, key, self._key_holder(chat_id, key, None))
            self._refuse_key(chat_id, key, start.replace_from)
        active = chat["active_turn_id"]
        if active is not None and chat["active_turn_expires_at"] > format_ts(leased_at):
            raise ChatBusy(chat_id, active)
        user_id, assistant_id = message_ids(start.turn_id)
        if start.turn_id in self._turns or user_id in self._messages:
            raise TurnAlreadyRecorded(start.turn_id)
        user_parts = encode_parts(start.user_parts)
        cut = start.replace_from
        if cut is not None:
            found = self._message_at(chat_id, cut)  # MessageNotFound, then the message read
            if expect is not None and expect.message is not None:
                expect.message.check(chat_id, cut, found["id"], found["status"],
                                     found["updated_at"])
        owner_of = chat["owner"]
        user_bytes = text_bytes(user_parts)
        if self._max_bytes is not None:  # after the cut's deletes, as the SQL stores
            self._refuse_over(owner_of, user_bytes - (0 if cut is None else sum(
                message_bytes(row) for at, row in self._by_seq[chat_id].items() if at >= cut)))
        if active is not None:
            self._reclaim(chat, now)
        if cut is not None:
            self._cut(chat, cut, now)
        messages = self._by_seq[chat_id]
        user_seq = next(reversed(messages), 0) + 1  # rows are kept in seq order
        # Rows as dict displays in their tables' column orders (``MESSAGE_COLUMNS``,
        # ``TURN_COLUMNS`` and ``attached``; tested): a third of ``dict.fromkeys`` and an
        # ``update``.
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
                     "ended_at": None, "attached": int(start.attached),
                     "client_key": key}
        if key is not None:
            self._take_key(chat_id, key)
        self._turns[start.turn_id] = turn
        self._chat_turns[chat_id].append(start.turn_id)
        self._grow(owner_of, user_bytes + 2)  # the answer's parts: "[]"
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
        expires = format_ts(lease_expiry(self._lease_clock(), lease_seconds))
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
        parts = append_part(message["parts"], part)
        self._grow(chat["owner"], text_bytes(parts) - text_bytes(message["parts"]))
        message.update(parts=parts, updated_at=now)
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
        was = message_bytes(assistant)
        assistant.update(status=_COMPLETED, parts=columns.parts, provider_state=columns.audit,
                         usage=columns.usage, updated_at=now)
        self._grow(chat["owner"], message_bytes(assistant) - was)
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
        was = 0 if assistant is None else message_bytes(assistant)
        if assistant is not None and assistant["status"] == _IN_PROGRESS:
            assistant.update(status=_ABORTED, parts=parts or assistant["parts"], updated_at=now,
                             usage=usage or assistant["usage"],
                             provider_state=audit or assistant["provider_state"])
        elif assistant is not None and audit and is_reclaimed(assistant["provider_state"]):
            # The turn lost its lease and was reclaimed: its bill, once (``_reclaimed``).
            assistant.update(usage=usage or assistant["usage"], provider_state=audit)
        if assistant is not None:
            self._grow(chat["owner"], message_bytes(assistant) - was)
        turn = self._turns.get(lease.turn_id)
        if turn is not None and turn["status"] == _IN_PROGRESS:
            turn.update(status=_ABORTED, reason=abort.reason, detail=abort.detail,
                        strategy=abort.strategy or turn["strategy"], path=path, ended_at=now)
        if chat["active_turn_id"] == lease.turn_id:  # a turn takes its chat once
            chat.update(active_turn_id=None, active_turn_expires_at=None, updated_at=now)

    async def reclaim_expired(self) -> int:
        now, leased_at = self._now(), self._lease_now()
        expired = [chat for chat in self._chats.values()
                   if chat["active_turn_id"] is not None
                   and chat["active_turn_expires_at"] <= leased_at]
        for chat in expired:
            self._reclaim(chat, now)
            chat.update(updated_at=now)
        return len(expired)
