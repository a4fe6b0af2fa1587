"""A turn's first heartbeat waits in its engine's ``FirstBeats`` queue, one loop timer
for every turn, and comes exactly one interval after the turn started, as a timer per
turn made it (issue 26: ``call_later`` + ``cancel`` per turn, each cancelled handle left
in the loop's heap for the interval)."""

from __future__ import annotations

import asyncio
import heapq
from collections.abc import Callable
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.engine.support import Env
from turnstate.engine._lease import FirstBeats


class FakeLoop:
    """``time`` and ``call_at`` by hand; ``advance`` runs the timers due, in order, as
    the loop does (``early``: up to that much before their time, as a loop's clock
    resolution lets it)."""

    def __init__(self, early: float = 0.0) -> None:
        self.now, self.early = 0.0, early
        self.timers: list[tuple[float, int, Callable[[], None]]] = []
        self.count = 0

    def time(self) -> float:
        return self.now

    def call_at(self, when: float, callback: Callable[[], None]) -> Any:
        self.count += 1
        heapq.heappush(self.timers, (when, self.count, callback))
        return Handle(when)

    def advance(self, to: float) -> None:
        while self.timers and self.timers[0][0] <= to:
            when, _, callback = heapq.heappop(self.timers)
            self.now = max(self.now, when - self.early)
            callback()
        self.now = max(self.now, to)


class Handle:
    """A timer handle as ``FirstBeats`` reads it (never cancelled here)."""

    def __init__(self, when: float) -> None:
        self._when = when

    def when(self) -> float:
        return self._when


class Keeper:
    def __init__(self, loop: FakeLoop, beats: list[tuple[int, float]], number: int) -> None:
        self.loop, self.beats, self.number = loop, beats, number

    def _first_beat(self) -> None:
        self.beats.append((self.number, self.loop.now))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["start", "stop", "wait"]),
                          st.floats(0, 4), st.integers(0, 30)), max_size=40),
       st.sampled_from([0.0, 1e-9]))
def test_each_keeper_beats_one_interval_after_its_start_unless_stopped(
        ops: list[tuple[str, float, int]], early: float) -> None:
    """Against the model of a timer per keeper: the same keepers beat, in the same
    order, each at its start plus the interval (to the loop's own early firing)."""
    interval = 3.0
    loop = FakeLoop(early)
    beats = FirstBeats(loop, interval)  # type: ignore[arg-type]
    seen: list[tuple[int, float]] = []
    entries: list[list[Any]] = []
    due: dict[int, float] = {}  # the model: keeper -> its beat time, while not stopped
    for op, dt, which in ops:
        loop.advance(loop.now + dt)
        if op == "start":
            number = len(entries)
            entries.append(beats.add(Keeper(loop, seen, number)))  # type: ignore[arg-type]
            due[number] = loop.now + interval
        elif op == "stop" and entries:
            number = which % len(entries)
            if due.get(number, -1.0) > loop.now:  # not beaten yet: a stop keeps it out
                entries[number][1] = None
                del due[number]
    loop.advance(loop.now + 2 * interval)
    expected = sorted(due.items(), key=lambda item: (item[1], item[0]))
    assert [n for n, _ in seen] == [n for n, _ in expected]
    for (_, at), (_, when) in zip(seen, expected, strict=True):
        assert when - early <= at <= when + 1e-9 or at == when
    assert not beats.waiting and beats.timer is None
    assert loop.count <= len(expected) + 1 + sum(1 for op in ops if op[0] == "start")


async def test_turns_arm_one_timer_for_their_heartbeats(env: Env) -> None:
    """Ten cursor turns in a row: one timer for the first heartbeat of them all (the old
    code armed ten, each cancelled at the turn's end and left in the loop's heap)."""
    await env.turn("first", tools=())
    loop = asyncio.get_running_loop()
    armed: list[float] = []
    call_at, call_later = loop.call_at, loop.call_later

    def counted_at(when: float, *args: Any, **kwargs: Any) -> Any:
        armed.append(when)
        return call_at(when, *args, **kwargs)

    def counted_later(delay: float, *args: Any, **kwargs: Any) -> Any:
        armed.append(delay)
        return call_later(delay, *args, **kwargs)

    loop.call_at, loop.call_later = counted_at, counted_later  # type: ignore[method-assign]
    try:
        for index in range(10):
            outcome = await env.turn(f"turn {index}", tools=())
            assert outcome.final.strategy == "cursor" and outcome.committed
    finally:
        del loop.call_at, loop.call_later
    assert len(armed) <= 1


async def test_an_engine_whose_interval_changed_starts_a_new_queue(env: Env) -> None:
    await env.turn("first", tools=())
    first = env.engine.first_beats
    assert first is not None and first.interval == env.engine.heartbeat_seconds
    await env.turn("second", tools=())
    assert env.engine.first_beats is first
    env.engine.heartbeat_seconds /= 2
    await env.turn("third", tools=())
    second = env.engine.first_beats
    assert second is not first and second is not None
    assert second.interval == env.engine.heartbeat_seconds
