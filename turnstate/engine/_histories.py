"""A chat's committed history, read whole once and then by its new messages only.

A replay or local-loop turn needs the chat's committed history. Reading all of it every
turn (``Store.load_history``) made a chat's n-th turn decode n turns of messages, so a
chat of n stateless turns decoded O(n^2) messages (1,000 turns of DeepSeek on an SQLite
file: 3 ms of CPU per turn at the start, 26 ms by the end, most of it the read).

``HistoryCache`` keeps the history it last read per chat with the chat's figures at that
read, and the next read asks the store only for the messages after the newest one it
holds (``Store.load_messages`` with ``after_seq``: one page off the index). It takes the
new messages only when the chat's own counters (``ChatRecord``, as the turn's begin read
them) say nothing but commits happened since: every commit adds exactly one completed
answer and bumps ``version`` by one, while every edit, delete or clear bumps ``version``
adding no answer (``storage._protocol``). So the cached history is reused when

* the chat is the same chat (same store, same ``created_at``: a chat deleted and made
  again under its id starts over),
* ``version`` grew by exactly the number of completed answers read after the cache,
* the newest completed seq is the chat's ``committed_seq`` and the characters add up to
  its ``history_chars``,

and otherwise the whole history is read again, as before. Nothing here is continuation
state: a cache another process never had, or lost, only costs one whole read.

The history comes back as a ``CountedHistory`` (``core._history_facts``): the messages
with the figures the context fit reads (characters by index, turn starts, the messages
holding media, opaque parts or unpaired tool parts), counted once per message and
extended with the new messages, so a turn's fit does not count the whole chat again.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from turnstate.core._context import part_chars
from turnstate.core._conversation import Message, MessageStatus, Role
from turnstate.core._history_facts import CountedHistory, facts_of
from turnstate.core._history_facts import extended as extended_facts
from turnstate.storage._protocol import Store
from turnstate.storage._store_records import ChatRecord

NEW_MESSAGES_PAGE = 64
"""The most messages read after the cached ones; a chat that grew by more (many turns
on other processes, many aborted turns) is read whole instead."""

DEFAULT_CACHED_CHATS = 64
"""How many chats' histories an engine keeps (least recently read forgotten first)."""

DEFAULT_CACHED_CHARS = 16_000_000
"""How much the kept histories may hold together, in counted characters (``part_chars``:
text, and media as its token estimate) plus the inline bytes of their images and files
(a chat of photos holds megabytes its counted characters do not show), ``MESSAGE_BYTES``
a message (a chat of short messages holds eight times its characters) and their facts
(``CachedHistory.size``: about the bytes the entry holds); a history above it alone is
not kept."""


@attrs.frozen(kw_only=True)
class CachedHistory:
    """A chat's committed history and the chat's figures it was read under."""

    store: Store = attrs.field(eq=False, repr=False)
    created_at: object
    version: int
    history: CountedHistory
    """The messages with their figures for the context fit (``core._history_facts``)."""
    chars: int
    size: int
    """``chars``, the history's inline media bytes and its facts' arrays: what it holds
    against the bound."""

    @property
    def last_seq(self) -> int:
        return self.history[-1].seq if self.history else 0


def media_bytes(messages: Sequence[Message]) -> int:
    """The inline bytes of the messages' images and files (``data``; a URL holds none)."""
    return sum(len(data) for m in messages for p in m.parts
               if (data := getattr(p, "data", None)) is not None and type(data) is bytes)


MESSAGE_BYTES = 400
"""What a decoded message holds besides its text and media, in bytes: its ``Message``,
its parts and their strings' headers (traced: 50 chats of 2,000 short messages held 45
MB for 5.6 M counted characters, about 390 bytes a message over its characters)."""


def held_bytes(messages: Sequence[Message]) -> int:
    """What ``messages`` hold besides their counted characters: their inline media bytes
    and ``MESSAGE_BYTES`` each."""
    return media_bytes(messages) + MESSAGE_BYTES * len(messages)


def extended(entry: CachedHistory, chat: ChatRecord,
             window: Sequence[Message]) -> tuple[Message, ...] | None:
    """``entry``'s history with the completed messages of ``window`` (read after its
    newest seq) when the chat's figures say only commits happened since; else None."""
    new = [m for m in window if m.status is MessageStatus.COMPLETED and m.seq > entry.last_seq]
    answers = sum(m.role is Role.ASSISTANT for m in new)
    history = entry.history + tuple(new)
    last = history[-1].seq if history else None
    if (chat.created_at != entry.created_at or chat.version - entry.version != answers
            or last != chat.committed_seq
            or entry.chars + sum(part_chars(m.parts) for m in new) != chat.history_chars):
        return None
    return history


class HistoryCache:
    """The last history read per chat, at most ``size`` chats and ``chars`` counted
    characters together (module docstring)."""

    __slots__ = ("chars", "entries", "held", "page_reads", "size", "whole_reads")

    def __init__(self, size: int = DEFAULT_CACHED_CHATS,
                 chars: int = DEFAULT_CACHED_CHARS) -> None:
        self.size, self.chars, self.held = size, chars, 0
        self.entries: dict[str, CachedHistory] = {}
        self.whole_reads = 0  # counted, for tests and benchmarks
        self.page_reads = 0

    async def load(self, store: Store, chat: ChatRecord) -> tuple[Message, ...]:
        """The committed history of ``chat`` (as the turn's begin read it), the same
        messages ``store.load_history`` gives."""
        entry = self._take(chat.id)
        history = None
        if entry is not None and entry.store is store and entry.created_at == chat.created_at:
            self.page_reads += 1
            window = await store.load_messages(chat.id, limit=NEW_MESSAGES_PAGE,
                                               after_seq=entry.last_seq)
            if not window.more:
                history = extended(entry, chat, window.messages)
        if history is None:
            self.whole_reads += 1
            history = await store.load_history(chat.id)
            facts = facts_of(history)
            chars = facts.chars[-1]
            size = chars + held_bytes(history) + facts.nbytes
        else:
            assert entry is not None
            new = history[len(entry.history):]
            facts = extended_facts(entry.history.facts, new)
            chars = chat.history_chars
            size = (entry.size - entry.history.facts.nbytes + (chars - entry.chars)
                    + held_bytes(new) + facts.nbytes)
        counted = CountedHistory(history, facts)
        self._keep(chat.id, CachedHistory(store=store, created_at=chat.created_at,
                                          version=chat.version, history=counted,
                                          chars=chars, size=size))
        return counted

    def _take(self, chat_id: str) -> CachedHistory | None:
        entry = self.entries.pop(chat_id, None)
        if entry is not None:
            self.held -= entry.size
        return entry

    def _keep(self, chat_id: str, entry: CachedHistory) -> None:
        if self.size <= 0 or entry.size > self.chars:
            return
        while self.entries and (len(self.entries) >= self.size
                                or self.held + entry.size > self.chars):
            self._take(next(iter(self.entries)))
        self.entries[chat_id] = entry
        self.held += entry.size
