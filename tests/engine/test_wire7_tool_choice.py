"""A forced ``tool_choice`` is obeyed by every emulator as the real APIs document it
(wire7): ``required`` makes the model call a tool though nothing in the question asks
for one, a tool's name makes it call that tool (and only it), ``none`` makes it answer
in text though the question asks for a call. Before, the emulators ignored the choice,
so an engine test of a forced choice passed whatever the engine sent."""

from __future__ import annotations

from typing import Any

import pytest

from turnstate import GenerationSettings, Tool, ToolSpec, TurnEngine, TurnInput
from turnstate.emulators import EmulatedProviders
from turnstate.testing import emulated_engine, emulated_providers, turn_events

__all__ = ["emulated_engine", "emulated_providers"]  # the fixtures, imported for pytest

MODELS = {"openai": "gpt-4o", "gemini": "gemini-2.5-flash", "openai-compatible": "gpt-4o",
          "deepseek": "deepseek-chat", "anthropic": "claude-sonnet-4-6"}

OBJECT = {"type": "object", "properties": {"city": {"type": "string"}}}


def _tools(ran: list[str]) -> tuple[Tool, ...]:
    def handler(name: str) -> Any:
        async def run(arguments: dict[str, Any]) -> str:
            ran.append(name)
            return f"{name} done"
        return run
    return tuple(Tool(spec=ToolSpec(name=name, parameters=OBJECT), handler=handler(name))
                 for name in ("alpha", "beta"))


async def _run(engine: TurnEngine, provider: str, text: str, choice: str) -> tuple[
        list[str], list[Any]]:
    ran: list[str] = []
    chat = await engine.store.create_chat(owner="o")
    turn = TurnInput(provider=provider, model=MODELS[provider], system_prompt="s",
                     user_text=text, tools=_tools(ran),
                     settings=GenerationSettings(tool_choice=choice))
    events = await turn_events(engine.run_turn(chat.id, turn))
    assert events[-1].type == "turn_completed", events[-1]
    return ran, events


@pytest.mark.parametrize("provider", sorted(MODELS))
async def test_a_forced_choice_makes_the_model_call_a_tool(
        emulated_engine: TurnEngine, emulated_providers: EmulatedProviders,
        provider: str) -> None:
    ran, _ = await _run(emulated_engine, provider, "What is the weather?", "required")
    assert ran == ["alpha"]  # nothing asked for a tool: the first one offered
    ran, _ = await _run(emulated_engine, provider, "[[call:alpha]] weather?", "beta")
    assert ran == ["beta"]  # the named tool, not the one the script called


@pytest.mark.parametrize("provider", sorted(MODELS))
async def test_choice_none_answers_in_text(
        emulated_engine: TurnEngine, emulated_providers: EmulatedProviders,
        provider: str) -> None:
    ran, events = await _run(emulated_engine, provider, "[[call:alpha]] weather?", "none")
    assert ran == []
    assert events[-1].text
