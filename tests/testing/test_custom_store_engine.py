"""The custom store of ``custom_store.py`` drives real turns: the engine continues by
cursor on it, answers a retried turn id from it, replays after an edit, and the server's
views can read what it stored. With the planted ``committed_seq`` bug the second turn
silently replays instead, the failure the conformance suite exists to catch."""

from __future__ import annotations

from tests.engine.support import FakeClock, collect, make_turn
from tests.testing.custom_store import DictStore
from turnstate.core import TextPart, TurnCompleted
from turnstate.emulators._scripted import ScriptedBackend
from turnstate.engine import TurnEngine
from turnstate.storage import decode_audit


async def turns(store: DictStore, *texts: str) -> list[TurnCompleted]:
    backend = ScriptedBackend()
    engine = TurnEngine(store, backend.adapters(), backend, clock=store.clock)
    chat = await store.create_chat(owner="alice", chat_id="c1")
    finals = []
    for index, text in enumerate(texts):
        outcome = await collect(engine.run_turn(chat.id, make_turn(text, turn_id=f"t{index}")))
        assert isinstance(outcome.final, TurnCompleted), outcome.final
        finals.append(outcome.final)
    return finals


async def test_the_engine_continues_by_cursor_on_the_custom_store() -> None:
    store = DictStore(FakeClock())
    finals = await turns(store, "first", "second", "third")
    assert [f.strategy for f in finals] == ["replay", "cursor", "cursor"]
    chat = await store.load_chat("c1")
    assert chat.committed_seq == 6
    last = (await store.load_history("c1"))[-1]
    assert last.provider_state is not None
    assert decode_audit(last.provider_state).strategy == "cursor"


async def test_a_planted_committed_seq_bug_turns_cursor_turns_into_replays() -> None:
    store = DictStore(FakeClock(), forget_commits=True)
    finals = await turns(store, "first", "second")
    assert [f.strategy for f in finals] == ["replay", "replay"]


async def test_a_retry_is_answered_from_the_store_and_an_edit_replays() -> None:
    store = DictStore(FakeClock())
    backend = ScriptedBackend()
    engine = TurnEngine(store, backend.adapters(), backend, clock=store.clock)
    chat = await store.create_chat(owner="alice", chat_id="c1")
    first = (await collect(engine.run_turn(chat.id, make_turn("one", turn_id="t1")))).final
    again = (await collect(engine.run_turn(chat.id, make_turn("one", turn_id="t1")))).final
    assert isinstance(first, TurnCompleted) and isinstance(again, TurnCompleted)
    assert (again.text, again.path) == (first.text, first.path)
    assert len(await store.list_messages(chat.id)) == 2
    await store.edit_message(chat.id, 1, (TextPart(text="one, edited"),))
    after = (await collect(engine.run_turn(chat.id, make_turn("two", turn_id="t2")))).final
    assert isinstance(after, TurnCompleted)
    assert after.strategy == "replay"
    assert (await store.load_chat(chat.id)).committed_seq == 4
