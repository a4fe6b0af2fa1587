"""A forced ``tool_choice`` is obeyed by every emulator as the real APIs document it
(wire7): ``required`` makes the model call a tool though nothing in the question asks
for one, a tool's name makes it call that tool (and only it), ``none`` makes it answer
in text though the question asks for a call. Before, the emulators ignored the choice,
so an engine test of a forced choice passed whatever the engine sent."""

from __future__ import annotations

from typing import Any

import aiohttp
import pytest

from turnstate import GenerationSettings, Tool, ToolSpec, TurnEngine, TurnInput
from turnstate.emulators import AnthropicEmulator, EmulatedProviders, EmulatorServer
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


@pytest.mark.parametrize("choice", [{"type": "any"}, {"type": "tool", "name": "alpha"}])
async def test_anthropic_refuses_a_forced_choice_with_thinking(choice: dict[str, Any]) -> None:
    """Extended thinking takes ``tool_choice`` ``auto`` and ``none`` only: the API's 400
    (the engine refuses such settings before sending; the emulator now does too)."""
    emulator = AnthropicEmulator()
    body = {"model": "claude-sonnet-4-5", "max_tokens": 4096, "stream": False,
            "thinking": {"type": "enabled", "budget_tokens": 1024}, "tool_choice": choice,
            "tools": [{"name": "alpha", "input_schema": OBJECT}],
            "messages": [{"role": "user", "content": "hi"}]}
    async with EmulatorServer(emulator) as server, aiohttp.ClientSession() as session:
        url = server.base_url + AnthropicEmulator.API_PREFIX + "/messages"
        async with session.post(url, json=body, headers={"x-api-key": "k"}) as refused:
            assert refused.status == 400
            assert "forces tool use" in (await refused.json())["error"]["message"]
        body["tool_choice"] = {"type": "auto"}
        async with session.post(url, json=body, headers={"x-api-key": "k"}) as answered:
            assert answered.status == 200
