"""A turn that loses its lease to another node's reclaim, after answered requests, writes
what they billed over the reclaim's "cost unknown" mark (moneysmall, 2026-12-05)."""

from __future__ import annotations

import asyncio
from typing import Any

from tests.engine.support import FakeClock, collect, make_turn, tool
from turnstate.core._conversation import TextPart
from turnstate.emulators._scripted import ScriptedBackend, ScriptStep
from turnstate.engine import TurnEngine
from turnstate.server._views import chat_cost, cost_unknown_turns
from turnstate.storage import MemoryStore, TurnStart, decode_audit


async def test_a_turn_reclaimed_mid_tool_writes_its_bill_late() -> None:
    clock = FakeClock()
    store = MemoryStore(clock=clock)
    chat = await store.create_chat(owner="alice")
    backend = ScriptedBackend()
    node_a = TurnEngine(store, backend.adapters(), backend, lease_seconds=30,
                        heartbeat_seconds=0.02)
    started = asyncio.Event()

    async def long_tool(_: dict[str, Any]) -> Any:
        started.set()
        await asyncio.Event().wait()

    backend.push("openai", ScriptStep.call(("slow", {"city": "x"})), ScriptStep.reply("late"))
    turn_a = asyncio.ensure_future(collect(node_a.run_turn(chat.id, make_turn(
        "a", tools=(tool("slow", long_tool, timeout=60),)))))
    await started.wait()
    clock.advance(seconds=31)  # node A's lease ran out in the store; node B takes the chat
    await store.begin_turn(chat.id, TurnStart(turn_id="b1", user_parts=(TextPart(text="b"),),
                                              provider="openai", model="gpt-4o"))
    outcome = await turn_a  # A's next renewal is refused: it ends and writes its bill
    assert outcome.final.reason == "lease_lost", outcome.final  # type: ignore[union-attr]
    stats = outcome.final.stats  # type: ignore[union-attr]
    assert stats.cost is not None and stats.requests == 1
    answer = (await store.list_messages(chat.id))[1]
    assert answer.usage == stats.usage and answer.provider_state is not None
    metadata = decode_audit(answer.provider_state).metadata or {}
    assert "leaseReclaimed" not in metadata and "usageMissing" not in metadata
    shown = (await store.load_messages_lean(chat.id, limit=50)).messages
    assert (cost_unknown_turns(shown), chat_cost(shown)) == (0, stats.cost.as_json()["total"])
    assert (await store.load_turn(outcome.final.turn_id)).reason == "lease_expired"
