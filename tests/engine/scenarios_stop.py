"""Scenarios of issue 21: detached turns stopped on request, in every stoppable state.

Each stop goes through ``TurnEngine.stop`` while a follower reads the turn; the turn ends
``aborted`` with ``stopped`` (its final event streamed to the follower), keeps the text
it had streamed, releases its lease, and the chat's next turn commits.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from tests.engine.scenarios import note_path, scenario, stored_envelope
from tests.engine.support import Env, forever, make_turn, tool
from turnstate.core import TextPart
from turnstate.core._errors import TurnFinished
from turnstate.emulators._scripted import ScriptStep
from turnstate.engine._turn_input import TurnInput
from turnstate.states import PathStep
from turnstate.storage import TurnStatus


async def stop_when(env: Env, turn: TurnInput, when: Callable[[str], bool]) -> list[Any]:
    """Start ``turn`` detached, follow it, stop it at the first event ``when`` accepts;
    returns the followed events' types and data (the last one is the final event)."""
    live = await env.engine.start_turn(env.chat_id, turn)
    following = await env.engine.follow(env.chat_id, live.turn_id)
    seen: list[Any] = []
    stopped = False
    async for entry in following.events:
        seen.append(entry)
        if not stopped and when(entry.type):
            await env.engine.stop(live.turn_id, owner=None)
            stopped = True
    assert stopped and [e.id for e in seen] == list(range(1, len(seen) + 1))
    record = await env.store.load_turn(live.turn_id)
    assert record.status is TurnStatus.ABORTED and record.reason == "stopped", record
    assert seen[-1].type == "turn_aborted" and '"reason":"stopped"' in seen[-1].data
    note_path(env, record.path)
    with pytest.raises(TurnFinished) as refused:
        await env.engine.stop(live.turn_id)
    assert refused.value.state == "aborted" and refused.value.reason == "stopped"
    return seen


def _step(source: str) -> PathStep:
    return PathStep(source=source, trigger="stopped", dest="abort", reason="stopped")


@scenario
async def stop_in_every_stoppable_state(env: Env) -> None:
    """Stopped in replay, cursor, local_loop, tool_iteration and validate; each next turn
    commits, and the stopped answer keeps the text streamed before the stop."""
    gate = asyncio.Event()  # never opened: the provider waits mid-answer until stopped
    env.backend.push("openai", ScriptStep.reply("partial answer", chunks=4, gate=gate,
                                                gate_after=2))
    seen = await stop_when(env, make_turn("a"), lambda kind: kind == "text_delta")
    streamed = "".join(e.data.split('"text":"')[1].split('"')[0] for e in seen
                       if e.type == "text_delta")
    messages = await env.store.list_messages(env.chat_id)
    assert streamed and messages[-1].status == "aborted"
    assert messages[-1].parts == (TextPart(text=streamed),)
    assert (await env.turn("b")).committed
    cursor = await stored_envelope(env)
    env.backend.push("openai", ScriptStep.reply("never", chunks=3, gate=gate, gate_after=1))
    await stop_when(env, make_turn("c"), lambda kind: kind == "text_delta")
    assert await stored_envelope(env) == cursor  # a stop never touches the cursor
    env.backend.push("openai", ScriptStep.call(("stuck", {"city": "x"})))
    await stop_when(env, make_turn("d", tools=(tool("stuck", forever),)),
                    lambda kind: kind == "tool_call")
    env.backend.push("anthropic", ScriptStep.reply("x", chunks=2, gate=gate, gate_after=1))
    await stop_when(env, make_turn("e", provider="anthropic", model="claude-sonnet-4-5"),
                    lambda kind: kind == "text_delta")
    assert (await env.turn("f")).committed
    await _stopped_in_validate(env)
    assert (await env.turn("h")).committed


async def _stopped_in_validate(env: Env) -> None:
    """The degradation write waits (a slow store): the stop lands in ``validate``."""
    opened = asyncio.Event()
    record = env.store.record_transition

    async def slow(*args: Any, **kwargs: Any) -> None:
        await opened.wait()
        await record(*args, **kwargs)

    env.store.record_transition = slow  # type: ignore[method-assign]
    try:
        await stop_when(env, make_turn("g", model="gpt-4.1"),
                        lambda kind: kind == "fallback_notice")
    finally:
        env.store.record_transition = record  # type: ignore[method-assign]
    path = (await env.store.list_turns(env.chat_id, limit=1))[0].path
    assert path[0] == _step("validate")
