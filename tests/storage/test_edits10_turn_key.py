"""``turn_key(chat_id, turn_id)`` (helper "edits10"): the client key a turn holds, read so a
regenerate's turn takes its question's key over; every backend."""

from __future__ import annotations

from typing import Any

from tests.storage.support import Backend, commit, start


async def test_a_turn_key_is_read_until_another_turn_takes_it(backend: Backend) -> None:
    store: Any = backend.store
    await store.create_chat(owner="alice", chat_id="c1")
    await store.create_chat(owner="alice", chat_id="c2")
    first = await store.begin_turn("c1", start("t1", client_key="k"))
    assert await store.turn_key("c1", "t1") == "k"  # running
    await store.commit_turn(first, commit())
    assert await store.turn_key("c1", "t1") == "k"  # ended
    assert await store.turn_key("c2", "t1") is None  # of another chat: none
    assert await store.turn_key("c1", "nope") is None
    plain = await store.begin_turn("c1", start("t2"))
    assert await store.turn_key("c1", "t2") is None
    await store.commit_turn(plain, commit())
    again = await store.begin_turn("c1", start("t3", client_key="k", replace_from=1))
    assert (await store.turn_key("c1", "t1"), await store.turn_key("c1", "t3")) == (None, "k")
    await store.commit_turn(again, commit())
