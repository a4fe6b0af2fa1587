"""Followers joining one turn's log share their first read (helper "follow7").

Each follower read the log on its own when it joined (the resume check and its first
events), however many joined: 200 followers joining a turn of 500 logged events at
once cost 200 reads and up to 0.7 s (SQLite) before the last got its first batch.
Now joins while a read is under way share it, and a join the turn's hub here can serve
(it holds the events from the join's id on) reads nothing.
"""

from __future__ import annotations

import asyncio
from typing import cast

import pytest

from tests.engine.support import Env
from tests.engine.test_follow_hub import CountingLog, _collect, _idle_turn, _quiet
from turnstate.core._errors import TurnNotFound
from turnstate.engine import _follow_hub
from turnstate.engine._follow import Following, follow_log
from turnstate.storage._turn_log import LoggedEvent, TurnLog, turn_log_of

JOINS = 30


async def _follow(env: Env, log: object, turn_id: str, after: int,
                  owner: str | None = None) -> Following:
    return await follow_log(env.store, cast(TurnLog, log), env.chat_id, turn_id, after=after,
                            owner=owner, encode=env.engine.detached.encode, poll_seconds=3600)


async def _to_the_end(followings: list[Following], gate: asyncio.Event,
                      ) -> list[list[LoggedEvent]]:
    tasks = [asyncio.ensure_future(_collect(f.batches, [])) for f in followings]
    gate.set()
    return await asyncio.wait_for(asyncio.gather(*tasks), 10)


async def test_followers_joining_at_once_share_one_read(env: Env) -> None:
    turn_id, gate = await _idle_turn(env, chunks=6)
    log = CountingLog(turn_log_of(env.store))
    afters = [i % 3 for i in range(JOINS)]
    followings = await asyncio.gather(*(_follow(env, log, turn_id, a) for a in afters))
    assert log.reads == 1  # was JOINS: each join read the log on its own
    got = await _to_the_end(list(followings), gate)
    last = got[0][-1]
    assert last.final
    for after, events in zip(afters, got, strict=True):
        assert [e.id for e in events] == list(range(after + 1, last.id + 1))
    assert not _follow_hub._HUBS and not _follow_hub._READS


async def test_a_join_the_hub_holds_reads_nothing(env: Env) -> None:
    """One follower follows (its hub holds what it first read); the others join one
    after another, from as far back as it: no read of their own."""
    turn_id, gate = await _idle_turn(env, chunks=6)
    log = CountingLog(turn_log_of(env.store))
    first = await _follow(env, log, turn_id, 0)
    batches = first.batches
    head = list(await anext(batches))
    waiting = asyncio.ensure_future(_collect(batches, head))
    await _quiet()  # it joins its hub (seeded with its first page) as it waits for more
    assert _follow_hub._HUBS
    reads, afters = log.reads, (0, 1, head[-1].id)
    later = [await _follow(env, log, turn_id, after) for after in afters]
    assert log.reads == reads  # was one read per join
    got = await _to_the_end(later, gate)
    everything = await asyncio.wait_for(waiting, 10)
    for after, events in zip(afters, got, strict=True):
        assert events == [e for e in everything if e.id > after]


async def test_a_shared_read_keeps_owners_apart_and_outlives_a_leaver(env: Env) -> None:
    """Another owner's join is refused whatever reads are under way (they are shared
    per owner); a follower that leaves while its read is shared ends only its wait."""
    turn_id, gate = await _idle_turn(env, chunks=3)
    log = turn_log_of(env.store)
    leaver = asyncio.ensure_future(_follow(env, log, turn_id, 0, owner="alice"))
    others = [asyncio.ensure_future(_follow(env, log, turn_id, 1, owner="alice"))
              for _ in range(3)]
    mallory = asyncio.ensure_future(_follow(env, log, turn_id, 1, owner="mallory"))
    await asyncio.sleep(0)  # every join has started; the first one's read is under way
    leaver.cancel()
    with pytest.raises(TurnNotFound):
        await mallory
    followings = await asyncio.gather(*others)
    left = (await asyncio.gather(leaver, return_exceptions=True))[0]
    if isinstance(left, Following):  # its read had ended before the cancel: it left after
        await left.batches.aclose()  # type: ignore[attr-defined]
    got = await _to_the_end(list(followings), gate)
    assert all(events[0].id == 2 and events[-1].final for events in got)
