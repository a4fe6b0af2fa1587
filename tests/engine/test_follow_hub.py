"""Followers of one turn on a node share one log reader (helper "followers").

Each follower of a turn running on another node read the turn's log on its own: once a
poll while idle and once at each change notification. 500 followers of one idle turn
polled the log about 250 times a second; 1,000 cost their node 0.6-0.7 s of CPU per 10 s.
Now the turn's followers here share one reader (``_follow_hub``): one read per poll or
notification, whatever their number, each follower with its own position.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any, cast

import pytest

from tests.engine.support import Env, make_turn
from turnstate.emulators._scripted import ScriptStep
from turnstate.engine import _follow_hub
from turnstate.engine._follow import follow_log
from turnstate.storage._turn_log import LoggedEvent, TurnLog, TurnLogPage, turn_log_of

FOLLOWERS = 40


class CountingLog:
    """A turn log that counts its ``read`` calls (everything else is the store's)."""

    def __init__(self, log: TurnLog) -> None:
        self.inner = log
        self.reads = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def read(self, *args: Any, **kwargs: Any) -> TurnLogPage:
        self.reads += 1
        return await self.inner.read(*args, **kwargs)


async def _idle_turn(env: Env, chunks: int) -> tuple[str, asyncio.Event]:
    """A turn running on ``env``'s node, its first delta logged, waiting for the gate."""
    gate = asyncio.Event()
    env.backend.push("openai", ScriptStep.reply("x" * chunks, chunks=chunks, gate=gate,
                                                gate_after=1))
    live = await env.engine.start_turn(env.chat_id, make_turn("idle"))
    log, deadline = turn_log_of(env.store), time.monotonic() + 5
    while (await log.read(env.chat_id, live.turn_id)).last_id < 2:
        assert time.monotonic() < deadline, "the turn's first events were never logged"
        await asyncio.sleep(0.01)
    return live.turn_id, gate


async def _quiet() -> None:
    """Let every ready task run (the memory store's reads never leave the loop)."""
    for _ in range(200):
        await asyncio.sleep(0)


async def _collect(batches: AsyncIterator[tuple[LoggedEvent, ...]],
                   got: list[LoggedEvent]) -> list[LoggedEvent]:
    async for batch in batches:
        got.extend(batch)
    return got


@pytest.mark.parametrize("env", ["memory"], indirect=True)
async def test_idle_followers_of_one_turn_cost_one_read_per_change(env: Env) -> None:
    turn_id, gate = await _idle_turn(env, chunks=3)
    log = CountingLog(turn_log_of(env.store))
    tasks = []
    for i in range(FOLLOWERS):
        following = await follow_log(env.store, cast(TurnLog, log), env.chat_id, turn_id,
                                     after=i % 3, owner=None,
                                     encode=env.engine.detached.encode, poll_seconds=3600)
        tasks.append(asyncio.ensure_future(_collect(following.batches, [])))
    await _quiet()
    log.reads = 0
    for _ in range(5):
        turn_log_of(env.store).signals.changed(turn_id)  # a notification: nothing new
        await _quiet()
    assert log.reads == 5  # was 5 * FOLLOWERS: each follower read the log on its own
    gate.set()
    got = await asyncio.wait_for(asyncio.gather(*tasks), 10)
    last = got[0][-1]
    assert last.final
    for i, events in enumerate(got):
        assert [e.id for e in events] == list(range(i % 3 + 1, last.id + 1))
        assert events[-1] == last
    assert not _follow_hub._HUBS


@pytest.mark.parametrize("buffer_events", [_follow_hub.BUFFER_EVENTS, 2])
async def test_followers_at_different_positions_each_get_every_event_once(
        env: Env, buffer_events: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """With a 2-event buffer the 30 deltas overflow it: the followers read on their own
    until they have caught up, and one that reads nothing until the end does too."""
    monkeypatch.setattr(_follow_hub, "BUFFER_EVENTS", buffer_events)
    turn_id, gate = await _idle_turn(env, chunks=30)
    log = turn_log_of(env.store)
    tasks, slow = [], None
    for after in (0, 1, 2, 2, 1, 0):
        following = await follow_log(env.store, log, env.chat_id, turn_id, after=after,
                                     owner=None, encode=env.engine.detached.encode,
                                     poll_seconds=0.05)
        if slow is not None:
            tasks.append(asyncio.ensure_future(_collect(slow.batches, [])))
        slow = following
    assert slow is not None
    stalled = slow.batches  # not read again until the turn has ended and the others have it
    first = await anext(stalled)
    gate.set()
    got = await asyncio.wait_for(asyncio.gather(*tasks), 10)
    rest = await asyncio.wait_for(_collect(stalled, list(first)), 10)
    last = got[0][-1]
    assert last.final and last.id > 30
    for after, events in zip((0, 1, 2, 2, 1, 0), [*got, rest], strict=True):
        assert [e.id for e in events] == list(range(after + 1, last.id + 1))
        assert events[-1] == last
    assert not _follow_hub._HUBS


@pytest.mark.parametrize("env", ["memory"], indirect=True)
async def test_the_hub_ends_when_its_last_follower_leaves_mid_turn(env: Env) -> None:
    turn_id, gate = await _idle_turn(env, chunks=3)
    log = turn_log_of(env.store)
    streams = []
    for _ in range(3):
        following = await follow_log(env.store, log, env.chat_id, turn_id, after=0,
                                     owner=None, encode=env.engine.detached.encode,
                                     poll_seconds=3600)
        stream = following.batches
        await anext(stream)
        streams.append(stream)
    waiting = [asyncio.ensure_future(anext(s)) for s in streams]  # type: ignore[arg-type]
    await _quiet()
    (hub,) = _follow_hub._HUBS.values()
    assert hub.followers == 3
    for stream, task in zip(streams, waiting, strict=True):
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await stream.aclose()  # type: ignore[attr-defined]
    assert not _follow_hub._HUBS
    await _quiet()
    assert hub.task is not None and hub.task.cancelled()
    gate.set()
    await env.engine.detached.settled()
