"""A store that stays down ends the turn once, after one patience budget (life12).

lifecycle11 gave each commit send its own budget (the lease as it stood when that send
first failed, less a tenth): the heartbeat renewing meanwhile, a store refusing writes
for good held the turn about two leases (three sends, the first failing at once) before
``commit_failed``. The sends now share the budget fixed at the first failure.
"""

from __future__ import annotations

import asyncio

from tests.engine.support import Outcome, collect, make_turn
from tests.engine.test_lifecycle11_outage import Outage
from tests.engine.virtual_time import run_virtual, virtual_store
from turnstate.emulators._scripted import ScriptedBackend, ScriptStep
from turnstate.engine import TurnEngine
from turnstate.engine._patience import MARGIN_SHARE
from turnstate.storage import TurnStatus

LEASE = 30.0
BUDGET = LEASE * (1 - MARGIN_SHARE)


async def _commit_down_for_good() -> tuple[Outcome, float, Outage, TurnStatus, str | None]:
    store = virtual_store()
    chat = await store.create_chat(owner="alice")
    outage = Outage(store, trigger="commit_turn", only={"commit_turn"}, span=float("inf"))
    backend = ScriptedBackend()
    backend.push("openai", ScriptStep.reply("paid answer"))
    engine = TurnEngine(outage, backend.adapters(), backend,  # type: ignore[arg-type]
                        lease_seconds=LEASE)
    loop = asyncio.get_running_loop()
    started = loop.time()
    outcome = await collect(engine.run_turn(chat.id, make_turn("q")))
    took = loop.time() - started
    record = await store.load_turn(outcome.final.turn_id)
    return outcome, took, outage, record.status, (await store.load_chat(chat.id)).active_turn_id


def test_a_commit_refused_for_good_fails_after_one_budget() -> None:
    outcome, took, outage, status, holder = run_virtual(_commit_down_for_good())
    assert outcome.final.reason == "commit_failed"  # type: ignore[union-attr]
    assert BUDGET - 1.5 <= took <= BUDGET + 0.5, took  # patient, but once: not ~2 leases
    assert outage.failed.count("commit_turn") > 3
    assert status is TurnStatus.ABORTED and holder is None  # recorded, the chat free
