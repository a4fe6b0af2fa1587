"""``follow`` of a turn iterated with ``run_turn`` (attached): live events from the join,
a notice that earlier ones are not available, and a slow follower never slows the
consumer (embedder2's design in docs/decisions.md, built by resume4)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from typing import Any

import pytest

from tests.engine.support import Env, make_turn, tool
from turnstate.core._errors import InvalidInput, TurnNotFound
from turnstate.emulators._scripted import ScriptStep
from turnstate.engine._attached import MAX_KEPT_EVENTS, NOT_LOGGED
from turnstate.engine._follow import REBUILT_FINAL_ID


def gated_tool(gate: asyncio.Event, entered: asyncio.Event) -> Any:
    async def handler(args: dict[str, Any]) -> Any:
        entered.set()
        await gate.wait()
        return {"ok": args}
    return tool("weather", handler)


async def _attached_turn_at_its_tool(env: Env, turn_id: str) -> tuple[
        Any, asyncio.Event, list[str]]:
    gate, entered = asyncio.Event(), asyncio.Event()
    env.backend.push("openai", ScriptStep.call(("weather", {"city": "Oslo"})),
                     ScriptStep.reply("it is sunny in Oslo", chunks=4))
    seen: list[str] = []

    async def consume() -> None:
        async with contextlib.aclosing(env.engine.run_turn(env.chat_id, make_turn(
                "weather?", turn_id=turn_id, tools=(gated_tool(gate, entered),)))) as events:
            async for event in events:
                seen.append(event.type)

    task = asyncio.create_task(consume())
    await entered.wait()
    return task, gate, seen


async def test_a_follower_of_an_attached_turn_gets_the_events_after_its_join(
        env: Env) -> None:
    """Joined while the turn's tool runs: the notice, then every event the consumer
    gets from then on, numbered from 1, to the final one; before, only the final."""
    task, gate, seen = await _attached_turn_at_its_tool(env, "t-att")
    following = await env.engine.follow(env.chat_id, "t-att")
    assert following.notice == NOT_LOGGED
    joined_at = len(seen)
    gate.set()
    got = [event async for event in following.events]
    await task
    assert [e.type for e in got] == seen[joined_at:]
    assert "text_delta" in [e.type for e in got]
    assert [e.id for e in got] == list(range(1, len(got) + 1))
    assert got[-1].final and json.loads(got[-1].data)["turnId"] == "t-att"


async def test_a_second_follower_resumes_within_the_kept_events(env: Env) -> None:
    """Ids are the turn's on this process from its first follower on: a follower
    reconnecting after an id it had gets the events after it, without a notice."""
    gates = [asyncio.Event(), asyncio.Event()]
    entered = [asyncio.Event(), asyncio.Event()]
    calls = 0

    async def handler(args: dict[str, Any]) -> Any:
        nonlocal calls
        index, calls = calls, calls + 1
        entered[index].set()
        await gates[index].wait()
        return {"ok": args}

    env.backend.push("openai", ScriptStep.call(("weather", {"city": "Oslo"})),
                     ScriptStep.call(("weather", {"city": "Rome"})),
                     ScriptStep.reply("sunny in both", chunks=3))
    consumer = asyncio.create_task(_count(env.engine.run_turn(env.chat_id, make_turn(
        "weather?", turn_id="t-two", tools=(tool("weather", handler),)))))
    await entered[0].wait()
    first = await env.engine.follow(env.chat_id, "t-two")
    batches = aiter(first.batches)
    gates[0].set()
    await entered[1].wait()
    had = await anext(batches)  # the events between the two tool runs
    await batches.aclose()  # the client's connection drops
    again = await env.engine.follow(env.chat_id, "t-two", after=had[-1].id)
    late = await env.engine.follow(env.chat_id, "t-two")
    assert again.notice is None
    assert late.notice == NOT_LOGGED
    gates[1].set()
    rest = await _events(again)
    assert [e.id for e in rest] == list(range(had[-1].id + 1, rest[-1].id + 1))
    assert rest[-1].final
    assert [e.id for e in await _events(late)] == [e.id for e in (*had, *rest)]
    await consumer


async def test_a_resume_of_an_attached_turn_checks_the_id_and_the_owner(env: Env) -> None:
    task, gate, _ = await _attached_turn_at_its_tool(env, "t-ids")
    following = await env.engine.follow(env.chat_id, "t-ids")
    with pytest.raises(InvalidInput):
        await env.engine.follow(env.chat_id, "t-ids", after=5)
    with pytest.raises(TurnNotFound):
        await env.engine.follow(env.chat_id, "t-ids", owner="mallory")
    gate.set()
    got = [event async for event in following.events]
    await task
    resumed_mid = got[0].id
    assert resumed_mid == 1


async def test_a_slow_follower_never_slows_the_consumer(env: Env) -> None:
    """A follower that takes nothing while the consumer runs a long turn: the consumer
    ends at its own pace, the follower then gets the events still kept and the final
    one (a gap in the ids says what it lost), memory stays bounded."""
    many = MAX_KEPT_EVENTS + 500
    gate, entered = asyncio.Event(), asyncio.Event()
    env.backend.push("openai", ScriptStep.call(("weather", {"city": "Oslo"})),
                     ScriptStep.reply("w " * many, chunks=many))
    turn = make_turn("go", turn_id="t-slow", tools=(gated_tool(gate, entered),))
    consumer = asyncio.create_task(_count(env.engine.run_turn(env.chat_id, turn)))
    await entered.wait()
    following = await env.engine.follow(env.chat_id, "t-slow")
    batches = aiter(following.batches)
    gate.set()
    began = time.monotonic()
    count = await consumer  # the follower has taken nothing meanwhile
    assert count > many
    assert time.monotonic() - began < 30
    got = [event async for batch in batches for event in batch]
    assert got[-1].final
    assert len(got) <= MAX_KEPT_EVENTS + 1
    assert got[-1].id == got[-2].id + 1


async def test_a_follower_gets_the_end_when_the_consumer_leaves(env: Env) -> None:
    """The consumer cancels mid-tool: the follower gets the recorded end (rebuilt from
    the store: the turn yields no final event to anyone)."""
    task, _gate, _ = await _attached_turn_at_its_tool(env, "t-left")
    following = await env.engine.follow(env.chat_id, "t-left")
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    got = await asyncio.wait_for(_events(following), 5)
    assert [e.type for e in got] == ["turn_aborted"]
    assert got[0].id == REBUILT_FINAL_ID
    assert json.loads(got[0].data)["reason"] == "cancelled"


async def test_a_turn_that_ended_long_ago_is_followed_at_once(env: Env) -> None:
    """An attached turn logs nothing: followed after its end, its end is rebuilt from
    the store. A reader gives a log 12 s for its final event, but not the log of a turn
    that ended a minute ago or more (``ENDED_LONG_AGO_SECONDS``): nobody writes its end
    now. It waited 12 s."""
    env.backend.push("openai", ScriptStep.reply("hi"))
    await env.turn("hello", turn_id="t-done")
    env.clock.advance(seconds=60)
    began = time.monotonic()
    got = await asyncio.wait_for(_events(await env.engine.follow(env.chat_id, "t-done")), 5)
    assert [e.type for e in got] == ["turn_completed"]
    assert time.monotonic() - began < 2


async def _count(events: Any) -> int:
    count = 0
    async with contextlib.aclosing(events) as iterator:
        async for _ in iterator:
            count += 1
    return count


async def _events(following: Any) -> list[Any]:
    return [event async for event in following.events]


async def test_a_stop_reaches_the_follower_as_the_turn_s_own_final_event(env: Env) -> None:
    """``stop`` of the attached turn (from the follower's side, say): the events the
    turn yields on its way out, ``turn_aborted`` ``stopped`` last, reach the follower
    with their ids (not a rebuilt end)."""
    task, _gate, seen = await _attached_turn_at_its_tool(env, "t-stop")
    following = await env.engine.follow(env.chat_id, "t-stop")
    await env.engine.stop("t-stop", chat_id=env.chat_id)
    got = await asyncio.wait_for(_events(following), 5)
    await task
    assert got[-1].type == seen[-1] == "turn_aborted"
    assert json.loads(got[-1].data)["reason"] == "stopped"
    assert got[-1].id < REBUILT_FINAL_ID
