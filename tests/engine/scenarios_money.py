"""Scenarios of issue 22: a replay over the context window aborts before any request,
and an opted-in trim drops the oldest whole turns (registered in ``SCENARIOS``)."""

from __future__ import annotations

from typing import Any

from tests.engine.scenarios import Env, Outcome, ScriptStep, scenario, stored_envelope
from tests.engine.support import collect, make_turn
from turnstate.core import ContextSettings
from turnstate.core._registry import DEFAULT_REGISTRY, ModelInfo
from turnstate.engine import TurnEngine
from turnstate.storage import decode_audit


def _tiny_engine(env: Env, limit: int) -> Any:
    registry = DEFAULT_REGISTRY
    for provider in ("openai", "anthropic"):
        registry = registry.with_model(ModelInfo(provider=provider, name="tiny",
                                                 context_limit=limit))
    return TurnEngine(env.store, env.backend.adapters(), env.backend, clock=env.clock,
                      registry=registry)


async def _tiny_turn(env: Env, engine: Any, text: str, **kwargs: Any) -> Outcome:
    outcome = await collect(engine.run_turn(env.chat_id, make_turn(text, **kwargs)))
    env.outcomes.append(outcome)
    return outcome


@scenario
async def replay_over_the_window_aborts_before_any_request(env: Env) -> None:
    """A replay or local loop whose history does not fit aborts ``context_overflow``
    before calling, naming the figures; the stored cursor is left as it was."""
    for n in range(4):
        await env.turn(f"turn {n}: " + "words " * 40)
    stored = await stored_envelope(env)
    sent = len(env.backend.requests)
    engine = _tiny_engine(env, 200)
    over = await _tiny_turn(env, engine, "and now?", model="tiny")
    assert over.states == ["validate", "replay", "abort", "aborted"]
    assert over.final.reason == "context_overflow"  # type: ignore[union-attr]
    detail = over.final.detail or ""  # type: ignore[union-attr]
    assert "input tokens" in detail and "context limit of 200" in detail
    assert len(env.backend.requests) == sent and await stored_envelope(env) == stored
    loop = await _tiny_turn(env, engine, "and here?", provider="anthropic", model="tiny")
    assert loop.states == ["validate", "local_loop", "abort", "aborted"]
    assert len(env.backend.requests) == sent


@scenario
async def trimming_drops_the_oldest_whole_turns(env: Env) -> None:
    """Opted in, the oldest whole turns are left out until it fits (a tool call stays
    with its result) and the audit marks the cut."""
    env.backend.push("openai", ScriptStep.call(("weather", {"city": "Paris"})),
                     ScriptStep.reply("sunny " * 30))
    await env.turn("first, with a tool: " + "words " * 40)
    for n in range(3):
        await env.turn(f"turn {n}: " + "words " * 40)
    engine = _tiny_engine(env, 300)
    trimmed = await _tiny_turn(env, engine, "and now?", model="tiny",
                               context=ContextSettings(overflow="trim"))
    assert trimmed.committed, trimmed.final
    replayed = env.backend.requests[-1].body["history"]
    kinds = [item["kind"] for item in replayed]
    assert kinds and kinds[0] == "user" and "tool_result" not in kinds[:1]
    calls = {i["callId"] if "callId" in i else i.get("call_id") for i in replayed
             if i["kind"] == "tool_call"}
    results = {i["callId"] if "callId" in i else i.get("call_id") for i in replayed
               if i["kind"] == "tool_result"}
    assert calls == results
    history = await env.store.load_history(env.chat_id)
    audit = decode_audit(history[-1].provider_state)
    assert audit is not None and audit.metadata["contextTrimmed"]["droppedMessages"] >= 2
    assert audit.metadata["contextTrimmed"]["contextLimit"] == 300
