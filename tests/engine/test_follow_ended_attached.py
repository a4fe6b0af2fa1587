"""``follow`` of a turn iterated with ``run_turn`` once it ended (helper "follow7"): its
log holds nothing, so the follower gets the notice ``not_logged`` and the end rebuilt
from the store (``REBUILT_FINAL_ID``), on every store. Before, the notice was None: a
stream that lacked every event but the last said nothing was missing."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest

from tests import pg_support
from tests.engine.conftest import _env
from tests.engine.support import Env, FakeClock
from turnstate.emulators._scripted import ScriptStep
from turnstate.engine._follow import NOT_LOGGED, REBUILT_FINAL_ID
from turnstate.storage import MemoryStore, PostgresStore, SqliteStore


@pytest.fixture(params=["memory", "sqlite", "postgres"])
async def any_env(request: pytest.FixtureRequest) -> AsyncIterator[Env]:
    clock = FakeClock()
    if request.param == "memory":
        yield await _env(MemoryStore(clock=clock), clock)
    elif request.param == "sqlite":
        async with SqliteStore.open(":memory:", clock=clock) as sqlite:
            yield await _env(sqlite, clock)
    else:
        request.getfixturevalue("pg_schema")
        async with PostgresStore.open(pg_support.DSN, schema=pg_support.SCHEMA,
                                      pool_max=2, clock=clock) as postgres:
            yield await _env(postgres, clock)


async def test_a_follower_of_an_ended_attached_turn_is_told_its_events_were_not_logged(
        any_env: Env) -> None:
    env = any_env
    env.backend.push("openai", ScriptStep.reply("hi there", chunks=3))
    done = await env.turn("hello", turn_id="t-ended")
    env.clock.advance(seconds=60)  # no grace for a log's final event (it has none)
    following = await env.engine.follow(env.chat_id, "t-ended")
    got = [event async for event in following.events]
    assert following.notice == NOT_LOGGED
    assert [(e.id, e.type) for e in got] == [(REBUILT_FINAL_ID, "turn_completed")]
    assert json.loads(got[0].data)["text"] == done.final.text
    # resumed from an id this process's followers could have had: the same notice
    again = await env.engine.follow(env.chat_id, "t-ended", after=3)
    assert again.notice == NOT_LOGGED
    assert [e.id async for e in again.events] == [REBUILT_FINAL_ID]
    # from the rebuilt end's id: it had the end, nothing more and nothing to tell
    past = await env.engine.follow(env.chat_id, "t-ended", after=REBUILT_FINAL_ID)
    assert past.notice is None
    assert [e async for e in past.events] == []
