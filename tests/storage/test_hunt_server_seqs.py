"""Conformance: a seq no store can hold (past a 64-bit integer, or below one) names no
message and bounds no window; SQLite raised ``OverflowError`` for it (a 500 behind the
server's ``replace_from``)."""

from __future__ import annotations

import pytest

from tests.storage.support import Backend, committed_turn, start
from turnstate.core._conversation import TextPart
from turnstate.core._errors import MessageNotFound

HUGE = (2**63, 2**64, -(2**63) - 1)


@pytest.mark.parametrize("seq", HUGE)
async def test_a_seq_past_the_stores_integers_is_message_not_found(
        backend: Backend, seq: int) -> None:
    store = backend.store
    await store.create_chat(owner="alice", chat_id="c1")
    before = await committed_turn(store, "c1", "t1", cursor="resp_1")
    for call in (store.edit_message("c1", seq, (TextPart(text="x"),)),
                 store.delete_message("c1", seq), store.delete_messages_from("c1", seq),
                 store.begin_turn("c1", start("t2", replace_from=seq), owner="alice")):
        with pytest.raises(MessageNotFound):
            await call
    assert await store.load_chat("c1") == before


@pytest.mark.parametrize("seq", HUGE)
async def test_a_window_bounded_past_the_stores_integers_reads_as_any_other(
        backend: Backend, seq: int) -> None:
    store = backend.store
    await store.create_chat(owner="alice", chat_id="c1")
    await committed_turn(store, "c1", "t1", cursor="resp_1")
    before = await store.load_messages("c1", limit=5, before_seq=seq)
    after = await store.load_messages("c1", limit=5, after_seq=seq)
    everything = [1, 2] if seq > 0 else []
    assert [m.seq for m in before.messages] == everything
    assert [m.seq for m in after.messages] == ([] if seq > 0 else [1, 2])
