"""A turn billed at another service tier has no list price (money, 2026-12-04), on the
OpenAI emulator over loopback: a project set to ``priority`` answers a request that names
no tier at that tier, and the turn reported the standard tier's list price (priority is
billed at about twice that, flex at half)."""

from __future__ import annotations

import pytest

from tests.engine.support import collect, make_turn
from turnstate.core._cost import audit_cost_text
from turnstate.core._events import TurnCompleted
from turnstate.emulators import EmulatedProviders
from turnstate.engine import TurnEngine
from turnstate.providers._transport import AiohttpTransport
from turnstate.storage import MemoryStore, decode_audit


async def test_a_turn_at_the_priority_tier_has_no_list_price() -> None:
    async with EmulatedProviders(["openai"]) as providers, AiohttpTransport() as transport:
        store = MemoryStore()
        engine = TurnEngine(store, providers.adapters, transport)
        chat = await store.create_chat(owner="alice")
        standard = (await collect(engine.run_turn(chat.id, make_turn("hello")))).events[-1]
        assert isinstance(standard, TurnCompleted) and standard.stats.cost is not None
        providers.emulators["openai"].project_tier = "priority"  # type: ignore[attr-defined]
        final = (await collect(engine.run_turn(chat.id, make_turn("again")))).events[-1]
        assert isinstance(final, TurnCompleted) and final.stats.usage.input_tokens > 0
        assert final.stats.cost is None
        answer = (await store.list_messages(chat.id))[-1]
        metadata = decode_audit(answer.provider_state or "").metadata or {}
        assert metadata["serviceTier"] == "priority" and "costUsd" not in metadata
        assert "'priority' service tier" in audit_cost_text(answer.provider_state)


@pytest.mark.parametrize(("provider", "model"), [("anthropic", "claude-sonnet-4-6"),
                                                 ("openai", "gpt-4o")])
async def test_a_turn_whose_answer_ran_a_web_search_has_no_list_price(
    provider: str, model: str,
) -> None:
    """The provider's own web search bills per search beside the tokens (Anthropic and
    OpenAI $10 per 1,000): the turn reported its tokens' price alone as its cost."""
    async with EmulatedProviders([provider]) as providers, AiohttpTransport() as transport:
        store = MemoryStore()
        engine = TurnEngine(store, providers.adapters, transport)
        chat = await store.create_chat(owner="alice")
        final = (await collect(engine.run_turn(chat.id, make_turn(
            "[[search:tram_timetable]] when is the tram?", provider=provider,
            model=model)))).events[-1]
        assert isinstance(final, TurnCompleted) and final.stats.usage.input_tokens > 0
        assert final.stats.cost is None
        answer = (await store.list_messages(chat.id))[-1]
        metadata = decode_audit(answer.provider_state or "").metadata or {}
        assert metadata["serverToolCalls"] == 1 and "costUsd" not in metadata
