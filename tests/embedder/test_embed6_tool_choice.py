"""``tool_choice`` in a turn without tools, on every provider (embed6). docs/api.md said a
turn without tools drops ``tool_choice``; the registry refuses one that forces a call
(``required``, a tool's name: there is nothing to force, and a provider would answer
400), and drops ``auto`` and ``none``. The doc now says so; these pin both halves."""

from __future__ import annotations

import json

import pytest

from turnstate import GenerationSettings, InvalidInput, TurnEngine, TurnInput
from turnstate.emulators import EmulatedProviders
from turnstate.testing import emulated_engine, emulated_providers, turn_events

__all__ = ["emulated_engine", "emulated_providers"]  # the fixtures, imported for pytest

MODELS = {"openai": "gpt-4o", "anthropic": "claude-sonnet-4-5", "gemini": "gemini-2.5-flash",
          "openai-compatible": "gpt-4o", "deepseek": "deepseek-chat"}


@pytest.mark.parametrize("provider", sorted(MODELS))
async def test_a_forced_choice_without_tools_is_refused_and_auto_or_none_dropped(
        emulated_engine: TurnEngine, emulated_providers: EmulatedProviders,
        provider: str) -> None:
    chat = await emulated_engine.store.create_chat(owner="o")

    def turn(choice: str) -> TurnInput:
        return TurnInput(provider=provider, model=MODELS[provider], system_prompt="s",
                         user_text="hi", settings=GenerationSettings(tool_choice=choice))

    for forced in ("required", "weather"):
        with pytest.raises(InvalidInput) as refused:
            await turn_events(emulated_engine.run_turn(chat.id, turn(forced)))
        assert refused.value.field == "settings.tool_choice"
    emulator = emulated_providers.emulators[provider]
    assert emulator.requests == []  # refused before the lease: nothing sent
    for free in ("auto", "none"):
        events = await turn_events(emulated_engine.run_turn(chat.id, turn(free)))
        assert events[-1].type == "turn_completed"
        body = json.loads(emulator.requests[-1].body)
        assert "tool_choice" not in body and "tool_choice" not in body.get(
            "generation_config", {})
