"""A forced ``tool_choice`` forces the turn's first request only (embed5). Before, a turn
with ``tool_choice="required"`` (or a tool's name) sent it with every request of its tool
loop, the ones carrying the tool results too: a real model must then call a tool in
every answer, so the turn could only end at the tool-iteration limit, aborted after
paying for every request. The OpenAI Agents SDK resets it the same way
(``reset_tool_choice``)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from turnstate import GenerationSettings, Tool, ToolSpec, TurnEngine, TurnInput
from turnstate.core._generation import after_tool_results
from turnstate.emulators import EmulatedProviders
from turnstate.testing import emulated_engine, emulated_providers, turn_events

__all__ = ["emulated_engine", "emulated_providers"]  # the fixtures, imported for pytest

MODELS = {"openai": "gpt-4o", "gemini": "gemini-2.5-flash", "openai-compatible": "gpt-4o",
          "deepseek": "deepseek-chat", "anthropic": "claude-sonnet-4-6"}


async def _lookup(_arguments: dict[str, Any]) -> str:
    return "found"


TOOLS = (Tool(spec=ToolSpec(name="lookup", parameters={"type": "object", "properties": {}}),
              handler=_lookup),)


def _choice(body: dict[str, Any]) -> object:
    return body.get("tool_choice", body.get("generation_config", {}).get("tool_choice"))


@pytest.mark.parametrize("provider", sorted(MODELS))
@pytest.mark.parametrize("forced", ["required", "lookup"])
async def test_the_requests_after_tool_results_leave_the_choice_to_the_model(
        emulated_engine: TurnEngine, emulated_providers: EmulatedProviders, provider: str,
        forced: str) -> None:
    chat = await emulated_engine.store.create_chat(owner="o")
    turn = TurnInput(provider=provider, model=MODELS[provider], system_prompt="s",
                     user_text="[[call:lookup {}]] look it up", tools=TOOLS,
                     settings=GenerationSettings(tool_choice=forced))
    events = await turn_events(emulated_engine.run_turn(chat.id, turn))
    assert events[-1].type == "turn_completed"
    first, second = (json.loads(r.body) for r in
                     emulated_providers.emulators[provider].requests[-2:])
    assert _choice(first) not in (None, "auto")  # the first request is forced
    assert _choice(second) in (None, "auto")  # after the results: the model's choice


def test_an_unforced_choice_is_kept_as_it_is() -> None:
    for choice in (None, "auto", "none"):
        settings = GenerationSettings(tool_choice=choice, temperature=0.5)
        assert after_tool_results(settings) is settings
    forced = GenerationSettings(tool_choice="required", temperature=0.5)
    assert after_tool_results(forced) == GenerationSettings(temperature=0.5)
