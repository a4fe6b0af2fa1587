"""The lease tests' virtual clock (``virtual_time``) is immune to a stalled loop (ops10).

A busy machine stalls the loop between two timers; on the real clock a stall longer
than the lease loses it, which is what made the lease timing tests fail now and then
under load. The same turn, with its loop blocked for longer than its lease inside a tool,
loses its lease on the real clock and commits on the virtual one.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from tests.engine.support import collect, make_turn, tool
from tests.engine.virtual_time import START, run_virtual, virtual_store
from turnstate.emulators._scripted import ScriptedBackend, ScriptStep
from turnstate.engine import TurnEngine
from turnstate.storage import MemoryStore

LEASE, BEAT = 0.2, 0.05


async def _stalled_turn(store: MemoryStore) -> str | None:
    chat = await store.create_chat(owner="alice")
    backend = ScriptedBackend()
    engine = TurnEngine(store, backend.adapters(), backend, lease_seconds=LEASE,
                        heartbeat_seconds=BEAT)

    async def stalls(_: dict[str, Any]) -> Any:
        await asyncio.sleep(BEAT * 2)  # renewed at least once
        time.sleep(LEASE * 1.5)  # noqa: ASYNC251 - the machine stalls the loop past the lease
        await asyncio.sleep(BEAT * 2)  # the heartbeat wakes
        return "done"

    backend.push("openai", ScriptStep.call(("stall", {"city": "x"})), ScriptStep.reply("ok"))
    outcome = await collect(engine.run_turn(chat.id, make_turn(
        "a", tools=(tool("stall", stalls, timeout=60),))))
    return None if outcome.committed else outcome.final.reason  # type: ignore[union-attr]


def test_a_stalled_loop_loses_the_lease_on_the_real_clock() -> None:
    assert asyncio.run(_stalled_turn(MemoryStore())) == "lease_lost"


def test_a_stalled_loop_does_not_move_the_virtual_clock() -> None:
    async def main() -> str | None:
        return await _stalled_turn(virtual_store())

    assert run_virtual(main()) is None


def test_the_virtual_clock_jumps_to_the_next_timer_and_stands_still_otherwise() -> None:
    async def main() -> tuple[float, float, float]:
        loop = asyncio.get_running_loop()
        before = loop.time()
        await asyncio.sleep(3600)  # an hour, at once
        slept = loop.time()
        time.sleep(0.01)  # noqa: ASYNC251 - real time passes; the virtual clock stands
        return before, slept, loop.time()

    started = time.monotonic()
    before, slept, after = run_virtual(main())
    assert before == START and slept - before >= 3600 and after == slept
    assert time.monotonic() - started < 60
