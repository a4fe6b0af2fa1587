"""A stop asked right after ``start_turn`` returns, before the turn's runner has taken
its first step (an embedder's ``start_turn`` then ``stop``; on MemoryStore the stop's
writes complete without yielding): a cancel then never entered the runner, whose
``finally`` ends the turn, so the turn hung with its chat held and ``settled`` never
returned. The cancel waits for the runner's first step, whose ``finally`` then runs."""

from __future__ import annotations

import asyncio

from tests.engine.support import Env, make_turn
from turnstate.core._events import TurnAborted
from turnstate.emulators._scripted import ScriptStep


async def test_a_stop_right_after_start_ends_the_turn_stopped(env: Env) -> None:
    finished: list[str] = []
    env.engine.detached.on_finished = lambda live: finished.append(live.turn_id)
    env.backend.push("openai", ScriptStep.reply("the answer"))
    live = await env.engine.start_turn(env.chat_id, make_turn("q"))
    await env.engine.stop(live.turn_id, chat_id=env.chat_id)
    async with asyncio.timeout(5):  # hung for ever on the old code
        await env.engine.detached.settled()
    assert finished == [live.turn_id]
    # stopped, or completed when the whole turn ran in the runner's first step (a memory
    # store and an in-process provider never yield): the stop came after its end
    assert (isinstance(live.final, TurnAborted) and live.final.reason == "stopped") \
        or (live.final is not None and live.final.type == "turn_completed"), live.final
    assert (await env.store.load_chat(env.chat_id)).active_turn_id is None
    env.backend.push("openai", ScriptStep.reply("the next answer"))
    nxt = await env.engine.start_turn(env.chat_id, make_turn("again"))
    async with asyncio.timeout(5):
        await env.engine.detached.settled()
    assert nxt.final is not None and nxt.final.type == "turn_completed"
