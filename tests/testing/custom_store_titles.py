"""``DictStore`` with chat titles, a bounded ``create_chat`` and ``search_chats``: the
store an embedder writes today (``custom_store.DictStore`` is one written before them)."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from datetime import datetime

from tests.testing.custom_store import DictStore
from turnstate.core import ChatLimitReached, ConfigurationError, TextPart
from turnstate.storage import ChatPosition, ChatRecord


def fold(text: str) -> str:
    """Search's comparison, as ``search_chats``' contract states it."""
    decomposed = unicodedata.normalize("NFKD", text)
    return re.sub("[\u0300-\u036f]", "", decomposed).casefold()


class TitledDictStore(DictStore):
    def __init__(self, clock: Callable[[], datetime], *, forget_commits: bool = False) -> None:
        super().__init__(clock, forget_commits=forget_commits)
        self.titles: dict[str, str] = {}

    async def create_chat(self, *, owner: str, chat_id: str | None = None,
                          max_chats: int | None = None) -> ChatRecord:
        if max_chats is not None and sum(
                chat.record.owner == owner for chat in self.chats.values()) >= max_chats:
            raise ChatLimitReached(owner, max_chats)
        record = await super().create_chat(owner=owner, chat_id=chat_id)
        self.titles.pop(record.id, None)
        return record

    async def rename_chat(self, chat_id: str, title: str | None, *,
                          owner: str | None = None) -> None:
        self.chat(chat_id, owner)
        if title is None:
            self.titles.pop(chat_id, None)
        else:
            self.titles[chat_id] = title

    async def chat_titles(self, chat_ids: Sequence[str], *, owner: str) -> dict[str, str]:
        return {chat_id: self.titles[chat_id] for chat_id in chat_ids
                if chat_id in self.titles and self.chats[chat_id].record.owner == owner}

    async def search_chats(self, owner: str, query: str, *, limit: int | None = None,
                           after: ChatPosition | None = None) -> tuple[ChatRecord, ...]:
        if not 1 <= len(query) <= 200:
            msg = "query must be 1 to 200 characters"
            raise ConfigurationError(msg)
        needle = fold(query)

        def holds(record: ChatRecord) -> bool:
            messages = self.chats[record.id].messages
            first = next((messages[seq] for seq in sorted(messages)
                          if messages[seq].role == "user"), None)
            texts = [part.text for part in first.parts if isinstance(part, TextPart)] \
                if first else []
            return any(needle in fold(text)
                       for text in (self.titles.get(record.id, ""), *texts) if text)

        found = [chat for chat in await self.list_chats(owner, after=after) if holds(chat)]
        return tuple(found[:limit])


@asynccontextmanager
async def titled_dict_store(clock: Callable[[], datetime], *,
                            forget_commits: bool = False) -> AsyncIterator[DictStore]:
    yield TitledDictStore(clock, forget_commits=forget_commits)
