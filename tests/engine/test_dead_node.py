"""A turn whose node died: its lease runs out, a sweep ends it, its followers get the end.

A dead node writes no final event and never commits or aborts its turn. Before the
sweep, such a turn stayed ``in_progress`` until the next turn on its chat took the lease
over, and a stream following it (a resume on another node) waited until then.
"""

from __future__ import annotations

import asyncio

import pytest

from tests.engine.support import Env
from turnstate.core._conversation import TextPart
from turnstate.core._errors import StorageError
from turnstate.engine import _follow
from turnstate.engine._follow import Following
from turnstate.storage import TurnStart, TurnStatus

LEASE = 30.0


async def _dead_node_turn(env: Env) -> str:
    """A turn begun by a node that then died: its lease, and nothing after it."""
    await env.store.begin_turn(env.chat_id, TurnStart(
        turn_id="dead", user_parts=(TextPart(text="hello?"),), provider="openai",
        model="gpt-4o", lease_seconds=LEASE))
    return "dead"


async def _final_of(following: Following) -> object:
    last = None
    async for batch in following.batches:
        last = batch[-1]
    assert last is not None and last.final
    return last


@pytest.fixture
def quick_follow(env: Env, monkeypatch: pytest.MonkeyPatch) -> Env:
    """Followers that poll the log every 10 ms and rebuild a missing final event at once
    (production: every 2 s, after 2 s of grace)."""
    monkeypatch.setattr(_follow, "FINAL_GRACE_SECONDS", 0.0)
    env.engine.detached.configure(stop_poll_seconds=0.01)
    return env


async def test_the_sweep_ends_a_dead_node_s_turn_and_its_follower_gets_the_end(
        quick_follow: Env) -> None:
    env = quick_follow
    turn_id = await _dead_node_turn(env)
    following = await env.engine.detached.follow(env.chat_id, turn_id)
    follower = asyncio.create_task(_final_of(following))
    assert await env.engine.detached.reclaim() == 0  # the lease still holds
    assert (await env.store.load_turn(turn_id)).status is TurnStatus.IN_PROGRESS
    assert not follower.done()

    env.clock.advance(seconds=LEASE)  # the dead node's lease runs out
    assert await env.engine.detached.reclaim() == 1
    final = await asyncio.wait_for(follower, timeout=30)

    record = await env.store.load_turn(turn_id)
    assert (record.status, record.reason) == (TurnStatus.ABORTED, "lease_expired")
    assert final.type == "turn_aborted"  # type: ignore[attr-defined]
    assert '"reason":"lease_expired"' in final.data.replace(" ", "")  # type: ignore[attr-defined]
    assert (await env.store.load_chat(env.chat_id)).active_turn_id is None


async def test_maintain_runs_the_reclaim_sweep(quick_follow: Env) -> None:
    env = quick_follow
    turn_id = await _dead_node_turn(env)
    following = await env.engine.detached.follow(env.chat_id, turn_id)
    env.clock.advance(seconds=LEASE)
    sweeper = asyncio.create_task(env.engine.detached.maintain(every=0.01))
    try:
        final = await asyncio.wait_for(_final_of(following), timeout=30)
    finally:
        sweeper.cancel()
    assert final.type == "turn_aborted"  # type: ignore[attr-defined]
    assert (await env.store.load_turn(turn_id)).reason == "lease_expired"


async def test_a_failed_reclaim_sweep_is_logged_and_the_next_one_runs(
        env: Env, caplog: pytest.LogCaptureFixture) -> None:
    calls: list[int] = []
    reclaim = env.store.reclaim_expired
    sweeps_done = asyncio.Event()

    async def flaky() -> int:
        calls.append(1)
        if len(calls) == 1:
            raise StorageError("the database restarts")
        sweeps_done.set()
        return await reclaim()

    env.store.reclaim_expired = flaky  # type: ignore[method-assign]
    sweeper = asyncio.create_task(env.engine.detached.maintain(every=0.01))
    try:
        await asyncio.wait_for(sweeps_done.wait(), timeout=30)
    finally:
        sweeper.cancel()
    assert "reclaim sweep failed: the database restarts" in caplog.text


def test_the_sweep_period_is_half_a_lease_or_a_tenth_of_the_retention(env: Env) -> None:
    detached = env.engine.detached
    assert env.engine.lease_seconds == 30.0 and detached.retention_seconds == 600.0
    assert detached.sweep_seconds() == 15.0
    detached.configure(retention_seconds=60.0)
    assert detached.sweep_seconds() == 6.0
    detached.configure(retention_seconds=1.0)
    assert detached.sweep_seconds() == 1.0  # at least a second
