"""A store an embedder might write: it keeps the chat-row counters (``committed_seq``,
``history_chars``) itself and leaves the rest of the protocol to an inner store, using
only public names (``turnstate.Store``, ``turnstate.MemoryStore``, ``ChatRecord``).

``forget_commits`` plants the bug the issue names: a commit that does not move
``committed_seq``, which would silently turn every later turn into a full replay.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Any

import attrs

from turnstate import MemoryStore
from turnstate.core import Part
from turnstate.core._context import part_chars
from turnstate.storage import ChatRecord, TurnCommit, TurnLease


class CountingStore:
    """The Store protocol, with ``committed_seq`` and ``history_chars`` kept here."""

    def __init__(self, clock: Callable[[], datetime], *, forget_commits: bool = False) -> None:
        self.inner = MemoryStore(clock=clock)
        self.forget_commits = forget_commits
        self.counters: dict[str, tuple[int | None, int]] = {}

    def __getattr__(self, name: str) -> Any:  # the methods this store does not change
        return getattr(self.inner, name)

    async def _recount(self, chat_id: str) -> None:
        history = await self.inner.load_history(chat_id)
        chars = part_chars([p for m in history for p in m.parts])
        self.counters[chat_id] = (history[-1].seq if history else None, chars)

    def _record(self, chat: ChatRecord) -> ChatRecord:
        seq, chars = self.counters.get(chat.id, (None, 0))
        return attrs.evolve(chat, committed_seq=seq, history_chars=chars)

    async def create_chat(self, *, owner: str, chat_id: str | None = None) -> ChatRecord:
        chat = await self.inner.create_chat(owner=owner, chat_id=chat_id)
        self.counters[chat.id] = (None, 0)
        return self._record(chat)

    async def load_chat(self, chat_id: str, *, owner: str | None = None) -> ChatRecord:
        return self._record(await self.inner.load_chat(chat_id, owner=owner))

    async def list_chats(self, owner: str, **kwargs: Any) -> tuple[ChatRecord, ...]:
        return tuple(map(self._record, await self.inner.list_chats(owner, **kwargs)))

    async def commit_turn(self, lease: TurnLease, commit: TurnCommit) -> ChatRecord:
        chat = await self.inner.commit_turn(lease, commit)
        if not self.forget_commits:
            await self._recount(chat.id)
        return self._record(chat)

    async def edit_message(self, chat_id: str, seq: int, parts: Sequence[Part], *,
                           owner: str | None = None) -> None:
        await self.inner.edit_message(chat_id, seq, parts, owner=owner)
        await self._recount(chat_id)

    async def delete_message(self, chat_id: str, seq: int, *, owner: str | None = None) -> None:
        await self.inner.delete_message(chat_id, seq, owner=owner)
        await self._recount(chat_id)

    async def delete_messages_from(self, chat_id: str, seq: int, *,
                                   owner: str | None = None) -> int:
        count = await self.inner.delete_messages_from(chat_id, seq, owner=owner)
        await self._recount(chat_id)
        return count


@asynccontextmanager
async def counting_store(clock: Callable[[], datetime], *,
                         forget_commits: bool = False) -> AsyncIterator[CountingStore]:
    yield CountingStore(clock, forget_commits=forget_commits)
