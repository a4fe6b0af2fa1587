"""A turn cancelled while its begin is in flight gives the chat back before it returns
(lifecycle5; found by the cancellation-point sweep on PostgreSQL, whose begin suspends).

The cancelled ``run_turn`` used to hand the release of the lease its begin took to a
background task and re-raise at once: the consumer's next turn on the chat, begun right
after, was refused ``ChatBusy`` by its own cancelled turn.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.engine.support import collect, make_turn
from turnstate.core._errors import ChatBusy
from turnstate.emulators._scripted import ScriptedBackend
from turnstate.engine import TurnEngine, _life_begin
from turnstate.storage import MemoryStore, TurnLease, TurnStatus


class SlowBegin(MemoryStore):
    """A store whose ``begin_turn`` suspends before it writes (a database round trip);
    with ``gate`` set, it waits for it after writing (a reply slow to come back)."""

    gate: asyncio.Event | None = None

    async def begin_turn(self, *args: Any, **kwargs: Any) -> TurnLease:
        await asyncio.sleep(0)
        lease = await super().begin_turn(*args, **kwargs)
        if self.gate is not None:
            await self.gate.wait()
        return lease


async def _consume(engine: TurnEngine, chat_id: str) -> None:
    async for _ in engine.run_turn(chat_id, make_turn("hello", tools=(), turn_id="t1")):
        pass


async def test_a_turn_cancelled_in_its_begin_frees_the_chat_before_it_returns() -> None:
    store = SlowBegin()
    chat = await store.create_chat(owner="alice")
    backend = ScriptedBackend()
    engine = TurnEngine(store, backend.adapters(), backend)
    task = asyncio.create_task(_consume(engine, chat.id))
    await asyncio.sleep(0)  # the task starts; its begin suspends
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert (await store.load_chat(chat.id)).active_turn_id is None
    record = await store.load_turn("t1")
    assert (record.status, record.reason) == (TurnStatus.ABORTED, "cancelled")
    outcome = await collect(engine.run_turn(chat.id, make_turn("again", tools=())))
    assert outcome.committed


async def test_a_second_cancel_leaves_the_release_to_finish_on_its_own() -> None:
    store = SlowBegin()
    store.gate = asyncio.Event()  # the begin lands, its reply is slow
    chat = await store.create_chat(owner="alice")
    backend = ScriptedBackend()
    engine = TurnEngine(store, backend.adapters(), backend)
    task = asyncio.create_task(_consume(engine, chat.id))
    await asyncio.sleep(0)
    task.cancel()
    await asyncio.sleep(0)  # the cancelled turn waits for its begin ...
    assert not task.done()
    task.cancel()  # ... until cancelled again: it goes then, the release goes on
    with pytest.raises(asyncio.CancelledError):
        await task
    with pytest.raises(ChatBusy):  # the begin is still in flight
        await collect(engine.run_turn(chat.id, make_turn("again", tools=())))
    store.gate.set()
    await asyncio.gather(*_life_begin._BACKGROUND)  # the release, let go by the turn
    assert (await store.load_chat(chat.id)).active_turn_id is None
