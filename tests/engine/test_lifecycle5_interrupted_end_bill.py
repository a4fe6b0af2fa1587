"""A turn whose ending is itself cut keeps its bill (lifecycle5; found by the sweep's
second cancel on PostgreSQL).

A cancelled turn records its abort with what its answered requests billed; a second
cancel while that write is in flight leaves the write to finish on its own, and ``run``'s
last resort records the abort again ("the turn was interrupted while it ended"). That
second record carried no usage and no audit, and the two writes race (on PostgreSQL each
takes a pooled connection): when the bare one landed first, the store kept the turn's
answer without its bill, neither recorded nor marked unknown, so the chat's cost left
it out silently.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.engine.support import make_turn, tool
from turnstate.emulators._scripted import ScriptedBackend, ScriptStep
from turnstate.engine import TurnEngine, _writes
from turnstate.storage import MemoryStore, TurnAbort, TurnLease


class SlowFirstAbort(MemoryStore):
    """The first abort write waits for ``gate`` (a pooled connection slower than the
    next one); later ones go straight through."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = asyncio.Event()
        self.aborts = 0
        self.first_sent = asyncio.Event()

    async def abort_turn(self, lease: TurnLease, abort: TurnAbort) -> None:
        self.aborts += 1
        if self.aborts == 1:
            self.first_sent.set()
            await self.gate.wait()
        await super().abort_turn(lease, abort)


async def test_a_turn_cancelled_twice_while_it_ends_keeps_its_bill() -> None:
    store = SlowFirstAbort()
    chat = await store.create_chat(owner="alice")
    backend = ScriptedBackend()
    engine = TurnEngine(store, backend.adapters(), backend)
    running = asyncio.Event()

    async def stuck(_: dict[str, Any]) -> Any:
        running.set()
        await asyncio.Event().wait()

    backend.push("openai", ScriptStep.call(("slow", {"city": "Oslo"})))
    turn = make_turn("hello", tools=(tool("slow", stuck, timeout=60),), turn_id="t1")

    async def consume() -> None:
        async for _ in engine.run_turn(chat.id, turn):
            pass

    task = asyncio.create_task(consume())
    await running.wait()  # the first request is answered (billed); its tool runs
    task.cancel()
    await store.first_sent.wait()  # the abort, with the bill, is being written ...
    task.cancel()  # ... when the ending is cut
    with pytest.raises(asyncio.CancelledError):
        await task
    store.gate.set()
    await asyncio.gather(*_writes._WRITING)
    answer = next(m for m in await store.list_messages(chat.id) if m.role.value == "assistant")
    assert answer.status.value == "aborted"
    assert answer.usage is not None and answer.usage.input_tokens > 0, answer
    assert answer.provider_state is not None and '"sent"' in answer.provider_state
