"""Following a turn iterated with ``run_turn`` (an attached turn) through the store
(helper "lifecycle7").

Such a turn logs nothing. From another process its empty log looked like a detached
turn's before its first write: a follower got no notice while it ran, and once it ended
waited ``FINAL_GRACE_SECONDS`` (12 s) for a final event nobody writes, on its own process
too once the turn had ended there. The store now records, with the turn, that it was
begun attached (``TurnStart.attached``; the log's page gives it back): a follower says
``not_logged`` at once and rebuilds the end as soon as the turn ends. Rows written
before the mark existed read "not known", as before.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from tests.engine.conftest import _env
from tests.engine.support import Env, FakeClock, make_turn
from tests.engine.test_lifecycle5_fence_signal import _opened, _stuck_run_turn
from turnstate.emulators._scripted import ScriptedBackend, ScriptStep
from turnstate.engine import TurnEngine
from turnstate.engine._follow import NOT_LOGGED, REBUILT_FINAL_ID
from turnstate.storage import MemoryStore, SqliteStore, Store
from turnstate.storage._turn_log import turn_log_of

BOUND = 3.0  # well under the 12 s grace the follower used to wait
STORES = ["memory", "sqlite-file", "postgres"]


@pytest.fixture(params=STORES)
def kind(request: pytest.FixtureRequest) -> str:
    if request.param == "postgres":
        request.getfixturevalue("pg_schema")
    return str(request.param)


async def _all(following: Any) -> list[Any]:
    async with asyncio.timeout(BOUND):
        return [event async for event in following.events]


async def test_a_running_attached_turn_followed_from_another_process_says_not_logged(
        kind: str, tmp_path: Path) -> None:
    async with _opened(kind, tmp_path) as store, _opened(kind, tmp_path) as second:
        other: Store = store if isinstance(store, MemoryStore) else second
        chat_id, engine, _, _, task = await _stuck_run_turn(store)
        (turn_id,) = engine.attached
        backend = ScriptedBackend()
        follower = TurnEngine(other, backend.adapters(), backend)  # another node's
        follower.detached.stop_poll_seconds = 0.05
        try:
            following = await follower.follow(chat_id, turn_id)
            assert following.notice == NOT_LOGGED
            page = await turn_log_of(other).read(chat_id, turn_id)
            assert (page.attached, page.last_id) == (True, 0)
        finally:
            task.cancel()  # its consumer leaves: the turn ends cancelled
            await asyncio.gather(task, return_exceptions=True)
        got = await _all(following)
        assert [(e.id, e.type) for e in got] == [(REBUILT_FINAL_ID, "turn_aborted")]
        assert json.loads(got[0].data)["reason"] == "cancelled"
        await follower.aclose()
        await engine.aclose()


@pytest.fixture(params=["memory", "sqlite"])
async def any_env(request: pytest.FixtureRequest) -> Any:
    clock = FakeClock()
    if request.param == "memory":
        yield await _env(MemoryStore(clock=clock), clock)
    else:
        async with SqliteStore.open(":memory:", clock=clock) as sqlite:
            yield await _env(sqlite, clock)


async def test_an_attached_turn_that_just_ended_here_is_followed_without_the_grace(
        any_env: Env) -> None:
    env = any_env
    env.backend.push("openai", ScriptStep.reply("hi there", chunks=3))
    done = await env.turn("hello", turn_id="t-just-ended")  # no clock moved: it just ended
    following = await env.engine.follow(env.chat_id, "t-just-ended")
    assert following.notice == NOT_LOGGED
    got = await _all(following)
    assert [(e.id, e.type) for e in got] == [(REBUILT_FINAL_ID, "turn_completed")]
    assert json.loads(got[0].data)["text"] == done.final.text


async def test_a_detached_turn_is_not_marked_attached(any_env: Env) -> None:
    env = any_env
    env.backend.push("openai", ScriptStep.reply("hi there", chunks=3))
    live = await env.engine.start_turn(env.chat_id, make_turn("hello"))
    await env.engine.detached.settled()
    page = await turn_log_of(env.engine.store).read(env.chat_id, live.turn_id)
    assert not page.attached and page.last_id > 0
