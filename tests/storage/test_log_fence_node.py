"""A node frozen past its lease (two engines on one store are two nodes) comes back after
another node reclaimed its detached turn: its later events, and its own ending, never
reach the turn's log, which stays as it was at the reclaim; the record says
``lease_expired`` and the node's turn ends without writing. Before, the log took the
stale node's next request's events and its ``turn_aborted``."""

from __future__ import annotations

import asyncio
from typing import Any

from turnstate import AiohttpTransport, MemoryStore, Tool, ToolSpec, TurnEngine, TurnInput
from turnstate.emulators import EmulatedProviders
from turnstate.storage import TurnStatus
from turnstate.testing import (
    ManualClock,
    emulated_providers,  # noqa: F401  (the fixture)
)

WAIT = 10.0  # a bound for a hang only


async def test_a_frozen_nodes_turn_adds_nothing_to_the_log_after_its_reclaim(
        emulated_providers: EmulatedProviders) -> None:  # noqa: F811
    clock = ManualClock()
    store = MemoryStore(clock=clock)
    started, thawed = asyncio.Event(), asyncio.Event()

    async def frozen(args: dict[str, Any]) -> dict[str, Any]:
        started.set()
        await thawed.wait()  # the node is stopped (SIGSTOP) until the test thaws it
        return {"ok": True}

    spec = ToolSpec(name="slow", description="a slow tool",
                    parameters={"type": "object", "properties": {}})
    turn = TurnInput(provider="openai", model="gpt-4o", system_prompt="s", turn_id="t1",
                     user_text="[[call:slow]] go",
                     tools=(Tool(spec=spec, handler=frozen, timeout=60),))
    async with AiohttpTransport() as transport:
        stale = TurnEngine(store, emulated_providers.adapters, transport, lease_seconds=30)
        other = TurnEngine(store, emulated_providers.adapters, transport)
        chat = await store.create_chat(owner="alice")
        await stale.detached.start(chat.id, turn)
        await asyncio.wait_for(started.wait(), WAIT)
        loop, log = asyncio.get_running_loop(), other.detached.log
        deadline = loop.time() + WAIT
        while not any(e.type == "tool_call" for e in (await log.read(chat.id, "t1")).events):
            assert loop.time() < deadline
            await asyncio.sleep(0.01)
        clock.advance(31)  # the lease ran out in the store; the stale node never knew
        assert await other.detached.reclaim() == 1
        at_reclaim = await log.read(chat.id, "t1")
        thawed.set()
        await asyncio.wait_for(stale.detached.settled(), WAIT)
        after = await log.read(chat.id, "t1")
        assert after.events == at_reclaim.events and after.last_id == at_reclaim.last_id
        assert not any(e.final for e in after.events)
        record = await store.load_turn("t1")
        assert (record.status, record.reason) == (TurnStatus.ABORTED, "lease_expired")
        assert (await store.load_chat(chat.id)).active_turn_id is None
