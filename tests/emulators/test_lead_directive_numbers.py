"""A ``[[call:NAME {...}]]`` directive whose arguments JSON cannot carry (``NaN``,
``Infinity``, ``1e999``) made every emulator answer ``500`` (its reply's arguments could
not be encoded); it now calls the tool with its schema's example arguments, as a
directive without arguments does."""

from __future__ import annotations

from typing import Any

import pytest

from turnstate import Tool, ToolSpec, TurnEngine, TurnInput
from turnstate.emulators import EmulatedProviders
from turnstate.emulators._conversation_model import parse_directives
from turnstate.testing import emulated_engine, emulated_providers, turn_events

__all__ = ["emulated_engine", "emulated_providers"]  # the fixtures, imported for pytest

MODELS = [("openai", "gpt-4.1"), ("anthropic", "claude-sonnet-4-5"),
          ("gemini", "gemini-2.5-flash"), ("openai-compatible", "gpt-4o-mini"),
          ("deepseek", "deepseek-chat")]


async def _echo(arguments: dict[str, Any]) -> str:
    return "ok"


@pytest.mark.parametrize("number", ["NaN", "-Infinity", "1e999"])
def test_arguments_json_cannot_carry_are_none(number: str) -> None:
    (directive,) = parse_directives(f'[[call:weather {{"city": {number}}}]]')
    assert directive.arguments is None
    (kept,) = parse_directives('[[call:weather {"city": "Oslo", "days": 2.5}]]')
    assert kept.arguments == {"city": "Oslo", "days": 2.5}


@pytest.mark.parametrize(("provider", "model"), MODELS)
async def test_a_call_directive_with_nan_arguments_runs_the_tool(
        emulated_engine: TurnEngine, emulated_providers: EmulatedProviders,
        provider: str, model: str) -> None:
    tool = Tool(spec=ToolSpec(name="weather", description="the weather",
                              parameters={"type": "object",
                                          "properties": {"city": {"type": "string"}}}),
                handler=_echo)
    chat = await emulated_engine.store.create_chat(owner="o")
    events = await turn_events(emulated_engine.run_turn(chat.id, TurnInput(
        provider=provider, model=model, system_prompt="s", tools=(tool,),
        user_text='[[call:weather {"city": NaN}]] how is it?')))
    assert events[-1].type == "turn_completed", events[-1]
    assert any(e.type == "tool_result" and not e.is_error for e in events), events
