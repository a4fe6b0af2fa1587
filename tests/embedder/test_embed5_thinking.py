"""A thinking budget without an output limit (embed5). ``GenerationSettings(
reasoning_budget_tokens=8000)`` on Anthropic passed the registry's check (the budget is
below the model's 64,000-token output limit), but the adapter sent its own default
``max_tokens`` (4,096) with it, and Anthropic refuses a budget not below ``max_tokens``
("`max_tokens` must be greater than `thinking.budget_tokens`"): the turn aborted
``provider_failed`` after taking the lease. The Anthropic emulator now refuses such a
request as the API does, and the adapter gives such a turn ``max_tokens`` = budget + its
default, the model's limit at most."""

from __future__ import annotations

import json

import aiohttp
import pytest

from turnstate import GenerationSettings, TurnEngine, TurnInput
from turnstate.emulators import EMULATOR_API_KEY, EmulatedProviders
from turnstate.testing import emulated_engine, emulated_providers, turn_events

__all__ = ["emulated_engine", "emulated_providers"]  # the fixtures, imported for pytest


@pytest.mark.parametrize(("budget", "sent"), [(1_024, 4_096), (4_096, 8_192),
                                               (8_000, 12_096), (63_000, 64_000)])
async def test_a_budget_alone_gets_room_above_it(
        emulated_engine: TurnEngine, emulated_providers: EmulatedProviders, budget: int,
        sent: int) -> None:
    chat = await emulated_engine.store.create_chat(owner="o")
    turn = TurnInput(provider="anthropic", model="claude-sonnet-4-6", system_prompt="s",
                     user_text="[[think]] hi",
                     settings=GenerationSettings(reasoning_budget_tokens=budget))
    events = await turn_events(emulated_engine.run_turn(chat.id, turn))
    assert events[-1].type == "turn_completed"
    body = json.loads(emulated_providers.emulators["anthropic"].requests[-1].body)
    assert body["thinking"] == {"type": "enabled", "budget_tokens": budget}
    assert body["max_tokens"] == sent


async def test_the_emulator_refuses_a_budget_not_below_max_tokens(
        emulated_providers: EmulatedProviders) -> None:
    """What the adapter sent before: its 4,096 with a budget of 8,000."""
    body = {"model": "claude-sonnet-4-6", "max_tokens": 4_096, "stream": True,
            "thinking": {"type": "enabled", "budget_tokens": 8_000},
            "messages": [{"role": "user", "content": "hi"}]}
    async with aiohttp.ClientSession() as session, session.post(
            emulated_providers.base_url("anthropic") + "/messages", json=body,
            headers={"x-api-key": EMULATOR_API_KEY,
                     "anthropic-version": "2023-06-01"}) as response:
        assert response.status == 400
        error = (await response.json())["error"]
    assert error["type"] == "invalid_request_error"
    assert "must be greater than `thinking.budget_tokens`" in error["message"]
