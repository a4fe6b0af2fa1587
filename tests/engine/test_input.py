"""Bad input is refused before the chat is touched (issue 12, items 4 and 5 of the defects).

User text that UTF-8 cannot encode or that is over the limit raises ``InvalidInput``
naming the field, before any lease, row or provider request; tool specs are checked
when they are built; a tool's unencodable output is repaired and says so; tool handlers
run at most ``max_concurrent_tools`` at once.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from tests.engine.support import Env, make_turn, tool
from turnstate.core import InvalidInput, Tool, ToolSpec
from turnstate.emulators._scripted import ScriptStep
from turnstate.engine import TurnEngine, TurnLimits


async def assert_untouched(env: Env) -> None:
    """No lease, no message, no turn and no provider request came of the refused turn."""
    assert (await env.store.load_chat(env.chat_id)).active_turn_id is None
    assert await env.store.list_messages(env.chat_id) == ()
    assert await env.store.list_turns(env.chat_id) == ()
    assert env.backend.requests == []


@pytest.mark.parametrize(("field", "turn"), [
    ("user_text", make_turn("hello \ud800 world")),
    ("user_text", make_turn("\udfff")),
    ("system_prompt", make_turn("hello", prompt="be \udc00 terse")),
])
async def test_text_utf8_cannot_encode_is_refused(env: Env, field: str, turn: Any) -> None:
    with pytest.raises(InvalidInput) as caught:
        await anext(env.engine.run_turn(env.chat_id, turn))
    assert caught.value.field == field and "surrogate" in caught.value.problem
    await assert_untouched(env)
    assert (await env.turn("fine")).committed


async def test_oversized_user_text_is_refused_at_the_configured_limit(env: Env) -> None:
    engine = TurnEngine(env.store, env.engine.adapters, env.backend, clock=env.clock,
                        limits=TurnLimits(max_user_text=100))
    with pytest.raises(InvalidInput, match="over the limit of 100") as caught:
        await anext(engine.run_turn(env.chat_id, make_turn("x" * 101)))
    assert caught.value.field == "user_text"
    await assert_untouched(env)
    events = [e async for e in engine.run_turn(env.chat_id, make_turn("x" * 100))]
    assert events[-1].type == "turn_completed"


@pytest.mark.parametrize(("name", "parameters", "field"), [
    ("weather", {"type": "nonsense", "properties": 5}, "tools[weather].parameters"),
    ("weather", {"type": "string"}, "tools[weather].parameters"),
    ("weather", {"type": "object", "properties": {"city": {"type": "strnig"}}},
     "tools[weather].parameters"),
    ("weather", {"type": "object", "required": "city"}, "tools[weather].parameters"),
    ("weather", {"type": "object", "default": object()}, "tools[weather].parameters"),
    ("weather", {"type": "object", "maximum": float("nan")}, "tools[weather].parameters"),
    ("weather", {"type": "object", "description": "\ud800"}, "tools[weather].parameters"),
    ("weather", ["not", "an", "object"], "tools[weather].parameters"),
    ("has space", {"type": "object"}, "tool.name"),
    ("", {"type": "object"}, "tool.name"),
    ("x" * 65, {"type": "object"}, "tool.name"),
])
def test_tool_specs_are_checked_when_built(name: str, parameters: Any, field: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        ToolSpec(name=name, parameters=parameters)
    assert caught.value.field == field


def test_good_tool_specs_are_accepted() -> None:
    ToolSpec(name="weather_v2", parameters={"properties": {"city": {"type": "string"}}})
    ToolSpec(name="search-docs", parameters={
        "type": "object", "properties": {"q": {"type": ["string", "null"]},
                                         "tags": {"type": "array", "items": {"enum": [1]}}},
        "required": ["q"], "additionalProperties": False})


async def test_a_spec_spoilt_after_it_was_built_does_not_lock_the_chat(env: Env) -> None:
    spoilt = tool("weather")
    spoilt.spec.parameters["default"] = {1, 2}  # a set: not JSON
    with pytest.raises(InvalidInput) as caught:
        await anext(env.engine.run_turn(env.chat_id, make_turn(tools=(spoilt,))))
    assert caught.value.field == "tools"
    await assert_untouched(env)
    assert (await env.turn("fine")).committed


async def test_a_tool_output_utf8_cannot_encode_is_repaired_and_says_so(env: Env) -> None:
    async def odd(_: dict[str, Any]) -> Any:
        return "bad \ud800 bytes"

    env.backend.push("openai", ScriptStep.call(("odd", {"city": "x"})))
    outcome = await env.turn("go", tools=(tool("odd", odd),))
    assert outcome.committed, outcome.final
    [result] = outcome.of_type("tool_result")
    assert result.output.startswith("bad \ufffd bytes") and "U+FFFD" in result.output
    stored = [p for m in await env.store.load_history(env.chat_id) for p in m.parts
              if getattr(p, "output", None) is not None]
    assert stored[0].output == result.output
    json.dumps(env.backend.requests[-1].body, ensure_ascii=False).encode("utf-8")


async def test_tool_handlers_run_at_most_the_limit_at_once(env: Env) -> None:
    running, peak, release = 0, 0, asyncio.Event()

    async def handler(_: dict[str, Any]) -> Any:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        if running == 3:
            release.set()
        await release.wait()
        running -= 1
        return "ok"

    engine = TurnEngine(env.store, env.engine.adapters, env.backend, clock=env.clock,
                        limits=TurnLimits(max_concurrent_tools=3))
    calls = [("t", {"city": str(i)}) for i in range(20)]
    env.backend.push("openai", ScriptStep.call(*calls))
    events = [e async for e in engine.run_turn(env.chat_id, make_turn(
        "go", tools=(Tool(spec=ToolSpec(name="t"), handler=handler),)))]
    assert events[-1].type == "turn_completed"
    assert len([e for e in events if e.type == "tool_result"]) == 20
    assert peak == 3


async def test_too_many_tool_calls_in_one_response_abort_naming_the_limit(env: Env) -> None:
    engine = TurnEngine(env.store, env.engine.adapters, env.backend, clock=env.clock,
                        limits=TurnLimits(max_tool_calls=5))
    env.backend.push("openai", ScriptStep.call(*[("weather", {"city": "x"})] * 6))
    events = [e async for e in engine.run_turn(env.chat_id, make_turn("go"))]
    final = events[-1]
    assert final.type == "turn_aborted" and final.reason == "provider_failed"
    assert "max_tool_calls" in final.detail and not any(e.type == "tool_call" for e in events)
    assert (await env.store.load_chat(env.chat_id)).active_turn_id is None


async def test_too_many_deltas_in_one_response_abort_naming_the_limit(env: Env) -> None:
    engine = TurnEngine(env.store, env.engine.adapters, env.backend, clock=env.clock,
                        limits=TurnLimits(max_output_deltas=10))
    env.backend.push("openai", ScriptStep.reply("y" * 50, chunks=50))
    events = [e async for e in engine.run_turn(env.chat_id, make_turn("go"))]
    final = events[-1]
    assert final.type == "turn_aborted" and final.reason == "provider_failed"
    assert "max_output_deltas" in final.detail
    assert len([e for e in events if e.type == "text_delta"]) == 10


async def _echo(args: dict[str, Any]) -> Any:
    return args


@pytest.mark.parametrize(
    ("parameters", "arguments", "accepted"),
    [
        ({"type": "object", "properties": {"a": True}}, '{"a": [1, {"b": 2}]}', True),
        ({"type": "object", "properties": {"a": False}}, '{"a": 1}', False),
        ({"type": "object", "properties": {"a": False}}, "{}", True),
        ({"type": "object", "properties": {"a": {"anyOf": [True]}}}, '{"a": 1}', True),
        ({"type": "object", "properties": {"a": {"anyOf": [False]}}}, '{"a": 1}', False),
        ({"type": "object", "additionalProperties": True}, '{"x": 1}', True),
        ({"type": "object", "properties": {"a": {"items": False}}}, '{"a": [1]}', False),
    ],
)
async def test_boolean_subschemas_check_arguments_instead_of_crashing(
        parameters: dict[str, Any], arguments: str, accepted: bool) -> None:
    """``true``/``false`` subschemas pass ``ToolSpec``'s check, so a call against them
    must become a result (an error result when refused), never an exception."""
    from turnstate.core import ToolCallPart
    from turnstate.engine._tools import run_tools

    echo = Tool(spec=ToolSpec(name="echo", description="", parameters=parameters),
                handler=_echo)
    call = ToolCallPart(call_id="c1", name="echo", arguments=arguments)
    (result,) = await run_tools((call,), {"echo": echo}, 8)
    assert result.is_error is (not accepted), result.output


async def test_arguments_nested_too_deeply_are_an_error_result_the_model_sees() -> None:
    from turnstate.core import ToolCallPart
    from turnstate.engine._tools import run_tools

    echo = Tool(spec=ToolSpec(name="echo", description="", parameters={"type": "object"}),
                handler=_echo)
    call = ToolCallPart(call_id="c1", name="echo", arguments="[" * 100_000 + "]" * 100_000)
    (result,) = await run_tools((call,), {"echo": echo}, 8)
    assert result.is_error and "nested too deeply" in result.output
