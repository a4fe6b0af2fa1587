"""OpenAI's extended prompt caching: ``prompt_cache_retention`` (money4).

OpenAI keeps a cached prefix five to ten minutes of inactivity ("in_memory"), so a chat
whose user answers every twenty minutes paid every turn's input at the full rate. The
Responses adapter now takes ``prompt_cache_retention="24h"`` and sends it only to a
model that takes it (the prompt-caching guide's list), and only while caching is on;
nothing else changes in the request.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.providers.support import request_json
from turnstate.core import CachePolicy, TurnCompleted
from turnstate.core._decisions import Strategy
from turnstate.core._errors import ConfigurationError
from turnstate.core._registry import DEFAULT_REGISTRY
from turnstate.emulators import EmulatedProviders
from turnstate.engine import TurnEngine, TurnInput
from turnstate.providers import OpenAIResponsesAdapter
from turnstate.providers._protocol import ProviderCall
from turnstate.providers._transport import AiohttpTransport
from turnstate.providers.openai_responses._codec import retention_field
from turnstate.storage import MemoryStore


@pytest.mark.parametrize(("model", "sent"), [
    ("gpt-4.1", "24h"), ("gpt-4.1-2025-04-14", "24h"), ("gpt-5", "24h"), ("gpt-5.1", "24h"),
    ("gpt-4o", None), ("gpt-4.1-mini", None), ("gpt-5-mini", None), ("o3", None),
    ("gpt-5.5", None), ("llama-3.3-70b", None)])
def test_the_field_goes_only_to_models_that_take_it(model: str, sent: str | None) -> None:
    assert retention_field("24h", model) == sent


def test_in_memory_is_never_sent_to_a_model_that_keeps_a_day_only() -> None:
    assert retention_field("in_memory", "gpt-4.1") == "in_memory"
    assert retention_field("in_memory", "gpt-5.5-pro") is None


def _call(model: str, **changes: Any) -> ProviderCall:
    return ProviderCall(strategy=Strategy.REPLAY, model=DEFAULT_REGISTRY.model("openai", model),
                        system_prompt="Be kind.", tools=(), user_text="hi", cache_key="key",
                        **changes)


def test_the_adapter_sends_it_while_caching_is_on() -> None:
    adapter = OpenAIResponsesAdapter(prompt_cache_retention="24h")
    assert request_json(adapter, _call("gpt-4.1"))["prompt_cache_retention"] == "24h"
    assert "prompt_cache_retention" not in request_json(adapter, _call("gpt-4o"))
    off = _call("gpt-4.1", cache=CachePolicy.OFF)
    assert "prompt_cache_retention" not in request_json(adapter, off)
    assert "prompt_cache_retention" not in request_json(OpenAIResponsesAdapter(),
                                                        _call("gpt-4.1"))


def test_an_unknown_retention_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="prompt_cache_retention"):
        OpenAIResponsesAdapter(prompt_cache_retention="1h")


SYSTEM = "".join(f"Rule {n}: answer plainly and keep the user's units. " for n in range(200))


async def _cached(retention: str | None) -> list[int]:
    options = {"openai": {"prompt_cache_retention": retention}} if retention else {}
    async with EmulatedProviders(["openai"], options) as stack, \
            AiohttpTransport() as transport:
        store = MemoryStore()
        engine = TurnEngine(store, stack.adapters, transport)
        chat = await store.create_chat(owner="alice")
        cached = []
        for turn in range(1, 4):
            stack.emulators["openai"].prompt_cache.advance(20 * 60)  # type: ignore[attr-defined]
            final = None
            async for event in engine.run_turn(chat.id, TurnInput(
                    provider="openai", model="gpt-4.1", system_prompt=SYSTEM,
                    user_text=f"Turn {turn}: the plan.")):
                final = event
            assert isinstance(final, TurnCompleted), final
            cached.append(final.stats.usage.cached_input_tokens)
        return cached


async def test_a_chat_twenty_minutes_apart_reads_its_prefix_with_a_days_retention() -> None:
    assert (await _cached(None))[1:] == [0, 0]
    assert all(tokens > 1024 for tokens in (await _cached("24h"))[1:])
