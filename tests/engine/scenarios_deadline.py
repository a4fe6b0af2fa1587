"""Scenarios of a turn's deadline (deadline10): ``deadline_exceeded`` out of every state
that has the edge, each turn's lease released and the chat's next turn committing.

The deadlines are tiny (``TurnInput.deadline_seconds``) and the provider or the tool
waits on an event never set: the turn ends by its deadline's timer, not by a sleep.
"""

from __future__ import annotations

import asyncio

from tests.engine.scenarios import scenario
from tests.engine.support import Env, forever, tool
from turnstate.core import TextPart
from turnstate.emulators._scripted import ScriptStep
from turnstate.storage import TurnStatus

TINY = 0.05  # seconds: the turns below wait on an event nobody sets
PASSED = 1e-12  # below the loop clock's resolution: passed before the first step


async def _past(env: Env, source: str, **turn: object) -> None:
    outcome = await env.turn("late", **turn)
    final = outcome.final
    assert final.type == "turn_aborted" and final.reason == "deadline_exceeded", final
    assert outcome.path[-2].source == source and outcome.path[-2].dest == "abort"
    assert final.detail is not None and "deadline" in final.detail
    record = await env.store.load_turn(final.turn_id)
    assert record.status is TurnStatus.ABORTED and record.reason == "deadline_exceeded"
    assert (await env.store.load_chat(env.chat_id)).active_turn_id is None


@scenario
async def deadline_in_every_working_state(env: Env) -> None:
    """``deadline_exceeded`` from validate, replay, cursor, local_loop and
    tool_iteration; the streamed text is kept, and the next turn commits."""
    gate = asyncio.Event()  # never set
    await _past(env, "validate", deadline_seconds=PASSED)
    env.backend.push("openai", ScriptStep.reply("partial answer", chunks=4, gate=gate,
                                                gate_after=2))
    await _past(env, "replay", deadline_seconds=TINY)
    answer = (await env.store.list_messages(env.chat_id))[-1]
    assert answer.status == "aborted" and answer.parts
    assert isinstance(answer.parts[0], TextPart) and answer.parts[0].text
    assert (await env.turn("b")).committed  # stores a cursor
    env.backend.push("openai", ScriptStep.reply("never", chunks=3, gate=gate, gate_after=1))
    await _past(env, "cursor", deadline_seconds=TINY)
    env.backend.push("openai", ScriptStep.call(("stuck", {"city": "x"})))
    await _past(env, "tool_iteration", deadline_seconds=TINY, tools=(tool("stuck", forever),))
    env.backend.push("anthropic", ScriptStep.reply("x", chunks=2, gate=gate, gate_after=1))
    await _past(env, "local_loop", deadline_seconds=TINY, provider="anthropic",
                model="claude-sonnet-4-5")
    assert (await env.turn("c")).committed
