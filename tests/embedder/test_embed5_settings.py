"""A per-turn output limit the provider cannot honour is refused before any money is
spent (embed5). OpenAI Responses refuses ``max_output_tokens`` below 16 with a 400
("Invalid 'max_output_tokens': integer below minimum value. Expected a value >= 16",
``integer_below_min_value``); before, turnstate took 1 to 15, took the chat's lease and
sent the request, and the turn aborted ``provider_failed`` on the provider's answer."""

from __future__ import annotations

import aiohttp
import pytest

from turnstate import (
    DEFAULT_REGISTRY,
    GenerationSettings,
    InvalidInput,
    TurnEngine,
    TurnInput,
)
from turnstate.emulators import EMULATOR_API_KEY, EmulatedProviders
from turnstate.testing import emulated_engine, emulated_providers, turn_events

__all__ = ["emulated_engine", "emulated_providers"]  # the fixtures, imported for pytest


def _turn(provider: str, model: str, limit: int) -> TurnInput:
    return TurnInput(provider=provider, model=model, system_prompt="s", user_text="hi",
                     settings=GenerationSettings(max_output_tokens=limit))


async def test_openai_responses_takes_no_limit_below_16(
        emulated_engine: TurnEngine, emulated_providers: EmulatedProviders) -> None:
    chat = await emulated_engine.store.create_chat(owner="o")
    with pytest.raises(InvalidInput) as caught:
        await turn_events(emulated_engine.run_turn(chat.id, _turn("openai", "gpt-4o", 15)))
    assert caught.value.field == "settings.max_output_tokens"
    assert "from 16 to" in str(caught.value)
    assert emulated_providers.emulators["openai"].requests == []
    assert await emulated_engine.store.list_turns(chat.id) == ()
    events = await turn_events(emulated_engine.run_turn(chat.id, _turn("openai", "gpt-4o", 16)))
    assert events[-1].type == "turn_completed"
    assert DEFAULT_REGISTRY.providers["openai"].min_output_tokens == 16


async def test_the_other_providers_take_a_limit_of_one(emulated_engine: TurnEngine) -> None:
    for provider, model in (("anthropic", "claude-sonnet-4-6"), ("gemini", "gemini-2.5-flash"),
                            ("openai-compatible", "gpt-4o"), ("deepseek", "deepseek-chat")):
        chat = await emulated_engine.store.create_chat(owner="o")
        events = await turn_events(emulated_engine.run_turn(chat.id, _turn(provider, model, 1)))
        assert events[-1].type == "turn_completed", provider
        assert DEFAULT_REGISTRY.providers[provider].min_output_tokens == 1


async def test_the_openai_emulator_refuses_it_as_the_api_does(
        emulated_providers: EmulatedProviders) -> None:
    body = {"model": "gpt-4o", "input": "hi", "max_output_tokens": 15, "stream": True}
    async with aiohttp.ClientSession() as session, session.post(
            emulated_providers.base_url("openai") + "/responses", json=body,
            headers={"Authorization": f"Bearer {EMULATOR_API_KEY}"}) as response:
        assert response.status == 400
        error = (await response.json())["error"]
    assert (error["code"], error["param"]) == ("integer_below_min_value", "max_output_tokens")
