"""A search reads the first ``SEARCHED_CHARS`` characters of a title or question
(attack4).

A search that few chats match walks every chat of its owner, and folded each first
question whole: 35 ms for a question of the server's 100,000 characters, so one search
of an owner with a thousand such chats held the event loop (or, on SQLite, the GIL from
the store's worker) for 35 s, and PostgreSQL sent every question's whole text. Each
store now reads and folds the first 2,000 characters; all three still agree.
"""

from __future__ import annotations

import pytest

from tests.storage.support import Backend, committed_turn
from turnstate.storage import _chat_search
from turnstate.storage._chat_search import SEARCHED_CHARS


async def test_a_search_folds_no_more_than_the_searched_characters(
        backend: Backend, monkeypatch: pytest.MonkeyPatch) -> None:
    store = backend.store
    long = "é" * 50_000 + " needle"
    for number in range(3):
        await store.create_chat(owner="alice", chat_id=f"c{number}")
        await committed_turn(store, f"c{number}", f"t{number}", text=long)
    folded: list[int] = []
    fold = _chat_search.fold

    def counting(text: str) -> str:
        folded.append(len(text))
        return fold(text)

    monkeypatch.setattr(_chat_search, "fold", counting)
    assert await store.search_chats("alice", "needle") == ()
    assert folded and max(folded) <= SEARCHED_CHARS, max(folded)


async def test_a_match_within_the_searched_characters_is_found(backend: Backend) -> None:
    store = backend.store
    texts = {"early": "x" * (SEARCHED_CHARS - 10) + "Needle",
             "late": "x" * SEARCHED_CHARS + "needle",
             "marked": "\x00\ud800" * (SEARCHED_CHARS // 2 - 5) + "needle"}
    for name, text in texts.items():
        await store.create_chat(owner="alice", chat_id=name)
        await committed_turn(store, name, f"t-{name}", text=text)
    found = await store.search_chats("alice", "needle")
    assert sorted(chat.id for chat in found) == ["early", "marked"]
