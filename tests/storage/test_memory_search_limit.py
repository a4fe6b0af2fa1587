"""MemoryStore.search_chats stops at its limit: it matched every chat of the owner first."""

from __future__ import annotations

import pytest

from turnstate.storage import MemoryStore, _memory


async def test_search_stops_matching_at_the_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    store = MemoryStore()
    for number in range(50):
        chat = await store.create_chat(owner="alice")
        await store.rename_chat(chat.id, f"needle {number}")
    seen: list[object] = []
    real = _memory.matches

    def counted(title: str | None, parts: object, needle: str) -> bool:
        seen.append(title)
        return real(title, parts, needle)  # type: ignore[arg-type]

    monkeypatch.setattr(_memory, "matches", counted)
    found = await store.search_chats("alice", "needle", limit=3)
    assert len(found) == 3
    assert len(seen) == 3  # was 50: every chat matched before the slice
    assert len(await store.search_chats("alice", "needle")) == 50  # no limit: all
