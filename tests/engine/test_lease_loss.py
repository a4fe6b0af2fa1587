"""A turn that loses its lease mid-tool stops at once and spends nothing more, and the
turn that took the chat keeps its commit and cursor (issue 20, "Done when"). Renewals
that fail only for a while are retried within the lease, and a turn renewed by its
heartbeat outlives its lease as long as it runs.

These run with a short lease (0.4 s, renewed every 0.1 s) on a virtual clock
(``virtual_time``): the store's expiry and the engine's deadline both read the loop's
clock, which moves only while the loop waits. On the real clock a loop stalled past a
beat by a busy machine lost the lease, and the renewal and heartbeat tests failed now and
then under load (ops10); here every duration is exact.
"""

from __future__ import annotations

import asyncio
from typing import Any

from tests.engine.support import collect, make_turn, tool
from tests.engine.virtual_time import run_virtual, virtual_store
from turnstate.core._errors import ChatBusy, StorageUnavailable
from turnstate.emulators._scripted import ScriptedBackend, ScriptStep
from turnstate.engine import TurnEngine
from turnstate.storage import DEFAULT_LEASE_SECONDS, MemoryStore, TurnStart, TurnStatus

LEASE, BEAT = 0.4, 0.1


class Partitioned:
    """A store proxy that can be cut off from the database (every call fails)."""

    def __init__(self, store: MemoryStore) -> None:
        self.store, self.cut = store, False
        self.failing_renewals = 0  # the next renewals that fail (then they work again)
        self.recovered = asyncio.Event()  # a renewal succeeded after failing ones

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.store, name)

        async def call(*args: Any, **kwargs: Any) -> Any:
            failing = name == "renew_lease" and self.failing_renewals > 0
            if self.cut or failing:
                self.failing_renewals -= failing
                msg = "the network to the database is down"
                raise StorageUnavailable(msg)
            result = await method(*args, **kwargs)
            if name == "renew_lease":
                self.recovered.set()
            return result

        return call


def test_a_turn_that_loses_its_lease_mid_tool_stops_and_the_new_holder_commits() -> None:
    run_virtual(_a_turn_that_loses_its_lease_mid_tool_stops_and_the_new_holder_commits())


async def _a_turn_that_loses_its_lease_mid_tool_stops_and_the_new_holder_commits() -> None:
    store = virtual_store()
    chat = await store.create_chat(owner="alice")
    backend = ScriptedBackend()
    cut_off = Partitioned(store)
    node_a = TurnEngine(cut_off, backend.adapters(), backend,  # type: ignore[arg-type]
                        lease_seconds=LEASE, heartbeat_seconds=BEAT)
    node_b = TurnEngine(store, backend.adapters(), backend, lease_seconds=LEASE,
                        heartbeat_seconds=BEAT)
    assert (await collect(node_b.run_turn(chat.id, make_turn("warm")))).committed
    started, runs, cancelled = asyncio.Event(), [], []

    async def long_tool(_: dict[str, Any]) -> Any:
        runs.append(1)
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.append(1)
            raise

    backend.push("openai", ScriptStep.call(("slow", {"city": "x"})), ScriptStep.reply("late"))
    turn_a = asyncio.ensure_future(collect(node_a.run_turn(chat.id, make_turn(
        "a", tools=(tool("slow", long_tool, timeout=60),)))))
    await started.wait()
    requests_at_loss = len(backend.requests)
    cut_off.cut = True  # node A can no longer renew: its lease runs out
    outcome_a = await turn_a
    assert outcome_a.final.reason == "lease_lost", outcome_a.final  # type: ignore[union-attr]
    assert runs == [1] and cancelled == [1]  # the tool was interrupted, never run again
    assert len(backend.requests) == requests_at_loss  # no provider request after the loss
    while True:  # the store's expiry is a wall-clock fact: node B retries until it passes
        try:
            outcome_b = await collect(node_b.run_turn(chat.id, make_turn("b")))
            break
        except ChatBusy:
            await asyncio.sleep(BEAT)
    assert outcome_b.committed, outcome_b.final
    cut_off.cut = False
    after = await store.load_chat(chat.id)
    assert after.active_turn_id is None and after.last_provider_state is not None
    assert after.committed_seq == (await store.load_turn(outcome_b.final.turn_id)).assistant_seq
    record_a = await store.load_turn(outcome_a.final.turn_id)
    assert record_a.status is TurnStatus.ABORTED  # lease_expired: node B reclaimed it
    history = await store.load_history(chat.id)
    assert history[-2].text() == "b" and history[-1].role.value == "assistant"
    assert "a" not in [m.text() for m in history]  # node A's turn left nothing committed


def test_renewals_that_fail_for_a_while_are_retried_within_the_lease() -> None:
    run_virtual(_renewals_that_fail_for_a_while_are_retried_within_the_lease())


async def _renewals_that_fail_for_a_while_are_retried_within_the_lease() -> None:
    store = virtual_store()
    chat = await store.create_chat(owner="alice")
    backend = ScriptedBackend()
    flaky = Partitioned(store)
    engine = TurnEngine(flaky, backend.adapters(), backend,  # type: ignore[arg-type]
                        lease_seconds=LEASE, heartbeat_seconds=BEAT)

    async def waits(_: dict[str, Any]) -> Any:
        flaky.failing_renewals = 2  # the next two renewals fail, then they work again
        flaky.recovered.clear()
        await flaky.recovered.wait()
        return "done"

    backend.push("openai", ScriptStep.call(("wait", {"city": "x"})), ScriptStep.reply("fine"))
    outcome = await collect(engine.run_turn(chat.id, make_turn(
        "a", tools=(tool("wait", waits, timeout=60),))))
    assert flaky.failing_renewals == 0 and outcome.committed, outcome.final


def test_the_default_lease_is_short_and_renewed_every_third_of_it() -> None:
    engine = TurnEngine(MemoryStore(), {}, ScriptedBackend())
    assert (engine.lease_seconds, engine.heartbeat_seconds) == (DEFAULT_LEASE_SECONDS, 10.0)
    assert DEFAULT_LEASE_SECONDS == 30.0
    assert TurnEngine(MemoryStore(), {}, ScriptedBackend(),
                      lease_seconds=LEASE).heartbeat_seconds == LEASE / 3


def test_a_turn_outlives_many_leases_while_its_heartbeat_renews_them() -> None:
    run_virtual(_a_turn_outlives_many_leases_while_its_heartbeat_renews_them())


async def _a_turn_outlives_many_leases_while_its_heartbeat_renews_them() -> None:
    """A turn may run for hours while its process lives: here a tool runs through three
    lease periods (real time) on the default interval (lease/3). Each renewal moves the
    store's expiry, so another turn is refused ``ChatBusy`` throughout, and the turn
    commits at the end."""
    store = virtual_store()
    chat = await store.create_chat(owner="alice")
    backend = ScriptedBackend()
    counted = Partitioned(store)
    engine = TurnEngine(counted, backend.adapters(), backend,  # type: ignore[arg-type]
                        lease_seconds=LEASE)
    loop, busy = asyncio.get_running_loop(), []

    async def outlives(_: dict[str, Any]) -> Any:
        started = loop.time()
        while loop.time() - started < 3 * LEASE:  # each wait is one renewal
            counted.recovered.clear()
            await counted.recovered.wait()
        try:
            await store.begin_turn(chat.id, TurnStart(
                turn_id="other", user_parts=(), provider="openai", model="gpt-4o"))
        except ChatBusy:
            busy.append(loop.time() - started)
        return "done"

    backend.push("openai", ScriptStep.call(("long", {"city": "x"})), ScriptStep.reply("fine"))
    outcome = await collect(engine.run_turn(chat.id, make_turn(
        "a", tools=(tool("long", outlives, timeout=10),))))  # without renewals: fails in 10 s
    assert outcome.committed, outcome.final
    assert len(busy) == 1 and busy[0] >= 3 * LEASE  # held three leases after its take
