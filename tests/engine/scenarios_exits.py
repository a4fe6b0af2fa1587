"""Engine scenarios for the exits of issue 12: ``internal_error`` from every working state
and ``cancelled`` from ``persist``. Registered in ``SCENARIOS`` like the others."""

from __future__ import annotations

from contextlib import aclosing
from typing import Any

from tests.engine.scenarios import note_path, scenario
from tests.engine.support import Env, Outcome, broken, make_turn, tool
from turnstate.emulators._scripted import ScriptStep
from turnstate.storage import TurnStatus


async def _async_boom(*args: Any, **kwargs: Any) -> Any:
    msg = "a bug"
    raise RuntimeError(msg)


async def _internal_error(env: Env, source: str, text: str, **kwargs: Any) -> None:
    outcome: Outcome = await env.turn(text, **kwargs)
    assert outcome.final.reason == "internal_error", outcome.final  # type: ignore[union-attr]
    assert outcome.path[-2].source == source and outcome.states[-2:] == ["abort", "aborted"]
    chat = await env.store.load_chat(env.chat_id)
    assert chat.active_turn_id is None


@scenario
async def internal_error_in_every_state(env: Env) -> None:
    """An unexpected exception in any state's action aborts the turn as internal_error."""
    openai, anthropic = env.engine.adapters["openai"], env.engine.adapters["anthropic"]
    with broken(openai, "envelope"):
        await _internal_error(env, "replay", "a")
    assert (await env.turn("b")).committed
    with broken(openai, "envelope"):
        await _internal_error(env, "cursor", "c")
    with broken(env.store, "record_transition", _async_boom):
        await _internal_error(env, "validate", "d", model="gpt-4.1")
    with broken(anthropic, "envelope"):
        await _internal_error(env, "local_loop", "e", provider="anthropic",
                              model="claude-sonnet-4-5")
    env.backend.push("anthropic", ScriptStep.call(("weather", {"city": "Oslo"})))
    with broken(anthropic, "extend_loop"):
        await _internal_error(env, "tool_iteration", "f", provider="anthropic",
                              model="claude-sonnet-4-5", tools=(tool("weather"),))
    with broken(env.store, "commit_turn"):
        await _internal_error(env, "persist", "g")
    assert (await env.turn("h")).committed


@scenario
async def leaving_right_after_entering_persist(env: Env) -> None:
    """``aclose()`` after the step into persist (no commit sent yet) aborts as cancelled."""
    async with aclosing(env.engine.run_turn(env.chat_id, make_turn("a"))) as events:
        async for event in events:
            if getattr(event, "dest", None) == "persist":
                break
    record = (await env.store.list_turns(env.chat_id, limit=1))[0]
    assert record.status == TurnStatus.ABORTED and record.reason == "cancelled", record
    assert record.path[-2].source == "persist"
    note_path(env, record.path)
    assert (await env.turn("b")).committed
