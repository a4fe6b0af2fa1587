"""A store an embedder might write: plain dictionaries, written from the public docs only
(the ``turnstate.storage.Store`` protocol's docstrings and docs/api.md, "Write your own
store"). It imports public names only, and nothing of turnstate's own stores.

``forget_commits`` plants the bug issue 23 names: a commit that does not move
``committed_seq``, which would silently turn every later turn into a full replay.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from datetime import datetime, timedelta

import attrs

from turnstate.core import (
    ChatBusy,
    ChatNotFound,
    CommitConflict,
    ConfigurationError,
    FilePart,
    ImagePart,
    LeaseLost,
    Message,
    MessageChanged,
    MessageNotFound,
    MessageStatus,
    Mode,
    Part,
    PersistenceRefused,
    Role,
    StorageError,
    TransitionPart,
    TurnAlreadyRecorded,
    TurnNotFound,
    decide_turn_persistence,
    part_chars,
    serialize_envelope,
)
from turnstate.storage import (
    ChatPosition,
    ChatRecord,
    ExpectedMessage,
    LeanMessage,
    LeanWindow,
    LeaseRenewal,
    MessageWindow,
    TurnAbort,
    TurnCommit,
    TurnLease,
    TurnRecord,
    TurnStart,
    TurnStatus,
    check_edit_parts,
    encode_audit,
    encode_context,
    lean_message,
    refuse_lean_parts,
)

LEASE_EXPIRED = "lease_expired"  # the abort reason of a reclaimed turn (the protocol's)

IN_PROGRESS, COMPLETED, ABORTED = (
    MessageStatus.IN_PROGRESS, MessageStatus.COMPLETED, MessageStatus.ABORTED)


@attrs.define
class Chat:
    record: ChatRecord
    epoch: int = 0
    messages: dict[int, Message] = attrs.field(factory=dict)  # seq -> message
    turns: list[str] = attrs.field(factory=list)  # turn ids, begin order


class DictStore:
    """The ``Store`` protocol over dictionaries; every method checks, then writes."""

    def __init__(self, clock: Callable[[], datetime], *, forget_commits: bool = False) -> None:
        self.clock = clock
        self.forget_commits = forget_commits
        self.chats: dict[str, Chat] = {}
        self.turns: dict[str, TurnRecord] = {}

    # -- reads -------------------------------------------------------------------------

    async def create_chat(self, *, owner: str, chat_id: str | None = None) -> ChatRecord:
        chat_id = uuid.uuid4().hex if chat_id is None else chat_id
        if chat_id in self.chats:
            msg = f"chat {chat_id!r} already exists"
            raise StorageError(msg)
        now = self.clock()
        record = ChatRecord(id=chat_id, owner=owner, created_at=now, updated_at=now)
        self.chats[chat_id] = Chat(record)
        return record

    async def load_chat(self, chat_id: str, *, owner: str | None = None) -> ChatRecord:
        return self.chat(chat_id, owner).record

    async def list_chats(self, owner: str, *, limit: int | None = None,
                         after: ChatPosition | None = None) -> tuple[ChatRecord, ...]:
        if limit is not None and limit < 0:
            msg = f"limit must not be negative, got {limit}"
            raise ConfigurationError(msg)
        keyed = sorted(((c.record.updated_at, c.record.id), c.record)
                       for c in self.chats.values() if c.record.owner == owner)[::-1]
        if after is not None:
            keyed = [(key, r) for key, r in keyed if key < (after.updated_at, after.id)]
        return tuple(r for _, r in keyed[:limit])

    async def load_history(self, chat_id: str, *,
                           owner: str | None = None) -> tuple[Message, ...]:
        return tuple(m for m in await self.list_messages(chat_id, owner=owner)
                     if m.status is COMPLETED)

    async def list_messages(self, chat_id: str, *,
                            owner: str | None = None) -> tuple[Message, ...]:
        messages = self.chat(chat_id, owner).messages
        return tuple(messages[seq] for seq in sorted(messages))

    async def load_messages(self, chat_id: str, *, limit: int, before_seq: int | None = None,
                            after_seq: int | None = None,
                            owner: str | None = None) -> MessageWindow:
        if limit < 1 or (before_seq is not None and after_seq is not None):
            msg = "load_messages takes a limit of at least 1 and at most one seq"
            raise ConfigurationError(msg)
        chat = self.chat(chat_id, owner)
        seqs = sorted(chat.messages)
        if after_seq is not None:
            later = [seq for seq in seqs if seq > after_seq]
            shown, more = later[:limit], len(later) > limit
        else:
            earlier = [seq for seq in seqs if before_seq is None or seq < before_seq]
            shown, more = earlier[-limit:], len(earlier) > limit
        messages = tuple(chat.messages[seq] for seq in shown)
        ids = {m.id for m in messages}
        return MessageWindow(messages=messages, more=more, total=len(seqs),
                             turns=[self.turns[t] for t in chat.turns
                                    if self.turns[t].assistant_message_id in ids])

    async def load_messages_lean(self, chat_id: str, *, limit: int,
                                 before_seq: int | None = None, after_seq: int | None = None,
                                 owner: str | None = None) -> LeanWindow:
        window = await self.load_messages(chat_id, limit=limit, before_seq=before_seq,
                                          after_seq=after_seq, owner=owner)
        return LeanWindow(messages=[lean_message(m) for m in window.messages],
                          more=window.more, total=window.total, turns=window.turns)

    async def list_messages_lean(self, chat_id: str, *,
                                 owner: str | None = None) -> tuple[LeanMessage, ...]:
        return tuple(lean_message(m) for m in await self.list_messages(chat_id, owner=owner))

    async def load_media_part(self, chat_id: str, seq: int, index: int, *,
                              owner: str | None = None) -> ImagePart | FilePart | None:
        if index < 0:
            raise ConfigurationError("load_media_part takes a part index of 0 or more")
        parts = self.message(self.chat(chat_id, owner), seq).parts
        part = parts[index] if index < len(parts) else None
        return part if isinstance(part, ImagePart | FilePart) else None

    async def load_turn(self, turn_id: str) -> TurnRecord:
        if turn_id not in self.turns:
            raise TurnNotFound(turn_id)
        return self.turns[turn_id]

    async def list_turns(self, chat_id: str, *, limit: int | None = 20,
                         owner: str | None = None) -> tuple[TurnRecord, ...]:
        ids = self.chat(chat_id, owner).turns[::-1][:limit]
        return tuple(self.turns[turn_id] for turn_id in ids)

    # -- a turn's writes ---------------------------------------------------------------

    async def begin_turn(self, chat_id: str, start: TurnStart, *,
                         owner: str | None = None) -> TurnLease:
        refuse_lean_parts(start.user_parts)
        now = self.clock()
        chat = self.chat(chat_id, owner)
        self.refuse_live_lease(chat, now)
        if start.turn_id in self.turns:
            raise TurnAlreadyRecorded(start.turn_id)
        if not start.lease_seconds > 0:
            msg = f"lease_seconds must be positive, got {start.lease_seconds!r}"
            raise ConfigurationError(msg)
        if start.replace_from is not None:  # a regenerate: the cut's own check, last
            self.message(chat, start.replace_from)
        if chat.record.active_turn_id is not None:  # expired: reclaimed first
            self.reclaim(chat, now)
        if start.replace_from is not None:  # then the cut, as delete_messages_from
            self.drop(chat, [m for at, m in chat.messages.items() if at >= start.replace_from])
        user_seq = max(chat.messages, default=0) + 1
        ids = (f"{start.turn_id}:user", f"{start.turn_id}:assistant")
        for message_id, seq, role, parts in ((ids[0], user_seq, Role.USER, start.user_parts),
                                             (ids[1], user_seq + 1, Role.ASSISTANT, ())):
            chat.messages[seq] = Message(id=message_id, chat_id=chat_id, seq=seq, role=role,
                                         status=IN_PROGRESS, parts=parts, created_at=now,
                                         updated_at=now)
        self.turns[start.turn_id] = TurnRecord(
            id=start.turn_id, chat_id=chat_id, status=TurnStatus.IN_PROGRESS,
            provider=start.provider, model=start.model, user_seq=user_seq,
            assistant_seq=user_seq + 1, started_at=now, assistant_message_id=ids[1])
        chat.turns.append(start.turn_id)
        chat.epoch += 1
        expires = now + timedelta(seconds=start.lease_seconds)
        self.update(chat, active_turn_id=start.turn_id, active_turn_expires_at=expires,
                    updated_at=now)
        return TurnLease(chat_id=chat_id, turn_id=start.turn_id, user_message_id=ids[0],
                         assistant_message_id=ids[1], user_seq=user_seq,
                         assistant_seq=user_seq + 1, base_version=chat.record.version,
                         expires_at=expires, epoch=chat.epoch)

    async def renew_lease(self, lease: TurnLease, lease_seconds: float) -> LeaseRenewal:
        chat = self.chat(lease.chat_id)
        if not self.holds(chat, lease):
            raise LeaseLost(lease.chat_id, lease.turn_id, lease.epoch)
        expires = self.clock() + timedelta(seconds=lease_seconds)
        self.update(chat, active_turn_expires_at=expires)
        return LeaseRenewal(expires_at=expires)

    async def record_transition(self, lease: TurnLease, part: TransitionPart, *,
                                clear_provider_state: bool) -> None:
        chat = self.chat(lease.chat_id)
        answer = chat.messages.get(lease.assistant_seq)
        if not self.holds(chat, lease) or answer is None or answer.status is not IN_PROGRESS:
            raise CommitConflict(lease.chat_id, lease.base_version, chat.record.version)
        now = self.clock()
        chat.messages[answer.seq] = attrs.evolve(answer, parts=(*answer.parts, part),
                                                 updated_at=now)
        if clear_provider_state:
            self.update(chat, last_provider_state=None, updated_at=now)

    async def commit_turn(self, lease: TurnLease, commit: TurnCommit) -> ChatRecord:
        refuse_lean_parts(commit.parts)
        state = commit.provider_state
        if state is not None and (state.mode is Mode.STATELESS_LOOP
                                  or state.loop_messages is not None):
            msg = "refusing to store a stateless-loop state or loop messages"
            raise PersistenceRefused(msg)
        kept = decide_turn_persistence(state)
        chat = self.chat(lease.chat_id)
        user, answer = chat.messages.get(lease.user_seq), chat.messages.get(lease.assistant_seq)
        if (not self.holds(chat, lease) or chat.record.version != lease.base_version
                or user is None or answer is None or user.id != lease.user_message_id
                or answer.id != lease.assistant_message_id
                or user.status is not IN_PROGRESS or answer.status is not IN_PROGRESS):
            raise CommitConflict(lease.chat_id, lease.base_version, chat.record.version)
        now = self.clock()
        parts = tuple(attrs.evolve(p, recovered=True) if isinstance(p, TransitionPart) else p
                      for p in commit.parts)
        chat.messages[user.seq] = attrs.evolve(user, status=COMPLETED, updated_at=now)
        chat.messages[answer.seq] = attrs.evolve(
            answer, status=COMPLETED, parts=parts, provider_state=encode_audit(commit.audit),
            usage=commit.usage, updated_at=now)
        self.end_turn(lease.turn_id, TurnStatus.COMPLETED, strategy=commit.strategy,
                      path=commit.path, ended_at=now)
        counters = {} if self.forget_commits else {
            "committed_seq": lease.assistant_seq,
            "history_chars": chat.record.history_chars + part_chars(user.parts)
            + part_chars(parts)}
        return self.update(
            chat, last_provider_state=None if kept is None else serialize_envelope(kept),
            last_context_state=encode_context(commit.context), active_turn_id=None,
            active_turn_expires_at=None, version=chat.record.version + 1, updated_at=now,
            **counters)

    async def abort_turn(self, lease: TurnLease, abort: TurnAbort) -> None:
        refuse_lean_parts(abort.parts)
        chat = self.chat(lease.chat_id)
        now = self.clock()
        for seq, message_id in ((lease.user_seq, lease.user_message_id),
                                (lease.assistant_seq, lease.assistant_message_id)):
            message = chat.messages.get(seq)
            if message is not None and message.id == message_id \
                    and message.status is IN_PROGRESS:
                kept = abort.parts if abort.parts and message.role is Role.ASSISTANT \
                    else message.parts
                chat.messages[seq] = attrs.evolve(message, status=ABORTED, parts=kept,
                                                  updated_at=now)
        turn = self.turns.get(lease.turn_id)
        if turn is not None and turn.status is TurnStatus.IN_PROGRESS:
            self.end_turn(turn.id, TurnStatus.ABORTED, reason=abort.reason,
                          detail=abort.detail, strategy=abort.strategy or turn.strategy,
                          path=abort.path, ended_at=now)
        if chat.record.active_turn_id == lease.turn_id:
            self.update(chat, active_turn_id=None, active_turn_expires_at=None,
                        updated_at=now)

    # -- changes outside turns ---------------------------------------------------------

    async def clear_provider_state(self, chat_id: str, *, reason: str,
                                   owner: str | None = None) -> None:
        self.bump(self.chat(chat_id, owner))

    async def edit_message(self, chat_id: str, seq: int, parts: Sequence[Part], *,
                           owner: str | None = None,
                           expect: ExpectedMessage | None = None) -> None:
        refuse_lean_parts(parts)
        check_edit_parts(parts)
        chat = self.chat(chat_id, owner)
        self.refuse_live_lease(chat, self.clock())
        message = self.expected(chat, seq, expect)
        later = max(self.clock(), message.updated_at + timedelta(microseconds=1))
        chat.messages[seq] = attrs.evolve(message, parts=parts, updated_at=later)
        if message.status is COMPLETED:
            self.update(chat, history_chars=chat.record.history_chars
                        - part_chars(message.parts) + part_chars(parts))
        self.bump(chat)

    async def delete_message(self, chat_id: str, seq: int, *,
                             owner: str | None = None) -> None:
        chat = self.chat(chat_id, owner)
        self.refuse_live_lease(chat, self.clock())
        self.drop(chat, [self.message(chat, seq)])

    async def delete_messages_from(self, chat_id: str, seq: int, *,
                                   owner: str | None = None,
                                   expect: ExpectedMessage | None = None) -> int:
        chat = self.chat(chat_id, owner)
        self.refuse_live_lease(chat, self.clock())
        self.expected(chat, seq, expect)
        doomed = [m for at, m in chat.messages.items() if at >= seq]
        self.drop(chat, doomed)
        return len(doomed)

    async def delete_chat(self, chat_id: str, *, owner: str | None = None) -> None:
        chat = self.chat(chat_id, owner)
        self.refuse_live_lease(chat, self.clock())
        for turn_id in chat.turns:
            del self.turns[turn_id]
        del self.chats[chat_id]

    async def reclaim_expired(self) -> int:
        now = self.clock()
        expired = [chat for chat in self.chats.values()
                   if chat.record.active_turn_expires_at is not None
                   and chat.record.active_turn_expires_at <= now]
        for chat in expired:
            self.reclaim(chat, now)
        return len(expired)

    # -- helpers -----------------------------------------------------------------------

    def chat(self, chat_id: str, owner: str | None = None) -> Chat:
        chat = self.chats.get(chat_id)
        if chat is None or (owner is not None and chat.record.owner != owner):
            raise ChatNotFound(chat_id)
        return chat

    @staticmethod
    def message(chat: Chat, seq: int) -> Message:
        if seq not in chat.messages:
            raise MessageNotFound(chat.record.id, seq)
        return chat.messages[seq]

    def expected(self, chat: Chat, seq: int, expect: ExpectedMessage | None) -> Message:
        """The message at ``seq``, which must be the one ``expect`` names."""
        message = self.message(chat, seq)
        if expect is not None and (message.id, message.status, message.updated_at) != (
                expect.id, expect.status, expect.updated_at):
            raise MessageChanged(chat.record.id, seq, message.id)
        return message

    @staticmethod
    def update(chat: Chat, **changes: object) -> ChatRecord:
        chat.record = attrs.evolve(chat.record, **changes)
        return chat.record

    def bump(self, chat: Chat) -> None:
        """An edit, delete or clear: the cursor goes, the version moves."""
        self.update(chat, last_provider_state=None, version=chat.record.version + 1,
                    updated_at=self.clock())

    @staticmethod
    def holds(chat: Chat, lease: TurnLease) -> bool:
        return chat.record.active_turn_id == lease.turn_id and chat.epoch == lease.epoch

    @staticmethod
    def refuse_live_lease(chat: Chat, now: datetime) -> None:
        active, expires = chat.record.active_turn_id, chat.record.active_turn_expires_at
        if active is not None and expires is not None and expires > now:
            raise ChatBusy(chat.record.id, active)

    def end_turn(self, turn_id: str, status: TurnStatus, **changes: object) -> None:
        self.turns[turn_id] = attrs.evolve(self.turns[turn_id], status=status, **changes)

    def drop(self, chat: Chat, doomed: list[Message]) -> None:
        """Delete messages: the committed ones leave the counters; turn records stay."""
        gone = {m.id for m in doomed}
        for message in doomed:
            del chat.messages[message.seq]
        for turn_id in chat.turns:
            if self.turns[turn_id].assistant_message_id in gone:
                self.end_turn(turn_id, self.turns[turn_id].status, assistant_message_id=None)
        committed = [m for m in doomed if m.status is COMPLETED]
        if committed:
            seqs = [seq for seq, m in chat.messages.items() if m.status is COMPLETED]
            self.update(chat, committed_seq=max(seqs, default=None),
                        history_chars=chat.record.history_chars
                        - part_chars(p for m in committed for p in m.parts))
        self.bump(chat)

    def reclaim(self, chat: Chat, now: datetime) -> None:
        """Abort the chat's expired turn: its messages, its record, the lease."""
        turn = self.turns[chat.record.active_turn_id or ""]
        for seq in (turn.user_seq, turn.assistant_seq):
            message = chat.messages.get(seq)
            if message is not None and message.status is IN_PROGRESS:
                chat.messages[seq] = attrs.evolve(message, status=ABORTED, updated_at=now)
        if turn.status is TurnStatus.IN_PROGRESS:
            self.end_turn(turn.id, TurnStatus.ABORTED, reason=LEASE_EXPIRED, ended_at=now)
        self.update(chat, active_turn_id=None, active_turn_expires_at=None, updated_at=now)


@asynccontextmanager
async def dict_store(clock: Callable[[], datetime], *,
                     forget_commits: bool = False) -> AsyncIterator[DictStore]:
    yield DictStore(clock, forget_commits=forget_commits)
