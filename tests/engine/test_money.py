"""Money, engine side: a degraded turn keeps the stored cursor until it commits, and a
turn's stats carry its cost and the chat's cache key."""

from __future__ import annotations

from collections.abc import AsyncIterator
from decimal import Decimal
from typing import Any

import pytest

from tests.engine.support import collect, make_turn, tool
from turnstate.core import ContextSettings, TurnCompleted, parse_envelope
from turnstate.core._hashing import prompt_cache_key
from turnstate.emulators import Fault
from turnstate.emulators._emulated import EmulatedProviders
from turnstate.engine import TurnEngine
from turnstate.providers._transport import AiohttpTransport
from turnstate.storage import MemoryStore

BAD = {"error": {"message": "Your input exceeds the context window of this model.",
                 "type": "invalid_request_error", "code": "context_length_exceeded"}}


@pytest.fixture
async def stack() -> AsyncIterator[tuple[EmulatedProviders, MemoryStore, TurnEngine, str]]:
    async with EmulatedProviders() as providers, AiohttpTransport() as transport:
        store = MemoryStore()
        engine = TurnEngine(store, providers.adapters, transport)
        chat = await store.create_chat(owner="o")
        yield providers, store, engine, chat.id


async def test_a_failed_degraded_turn_keeps_the_cursor_and_reverting_continues_by_it(
    stack: tuple[EmulatedProviders, MemoryStore, TurnEngine, str],
) -> None:
    providers, store, engine, chat_id = stack
    for n in range(5):
        await collect(engine.run_turn(chat_id, make_turn(f"turn {n}", tools=())))
    before = (await store.load_chat(chat_id)).last_provider_state
    assert before is not None
    providers.emulators["openai"].faults.push(Fault(status=400, body=BAD))
    failed = await collect(engine.run_turn(chat_id, make_turn(
        "with a tool", tools=(tool("weather"),))))
    assert not failed.committed and failed.final.degradation == "toolset_changed"
    assert (await store.load_chat(chat_id)).last_provider_state == before
    reverted = await collect(engine.run_turn(chat_id, make_turn("without it", tools=())))
    assert reverted.committed and reverted.triggers[0] == "continue_with_cursor"
    sent = providers.emulators["openai"].requests[-1].json
    assert sent["previous_response_id"] == parse_envelope(before).cursor


async def test_a_degraded_turn_that_commits_replaces_the_cursor(
    stack: tuple[EmulatedProviders, MemoryStore, TurnEngine, str],
) -> None:
    _, store, engine, chat_id = stack
    await collect(engine.run_turn(chat_id, make_turn("one", tools=())))
    before = (await store.load_chat(chat_id)).last_provider_state
    done = await collect(engine.run_turn(chat_id, make_turn("two", tools=(tool("weather"),))))
    assert done.committed and done.final.degradation == "toolset_changed"
    after = (await store.load_chat(chat_id)).last_provider_state
    assert after is not None and after != before


async def test_an_unusable_envelope_is_still_cleared_at_once(
    stack: tuple[EmulatedProviders, MemoryStore, TurnEngine, str],
) -> None:
    providers, store, engine, chat_id = stack
    await collect(engine.run_turn(chat_id, make_turn("one", tools=())))
    store._chats[chat_id]["last_provider_state"] = '{"schemaVersion": "x"}'
    providers.emulators["openai"].faults.push(Fault(status=400, body=BAD))
    failed = await collect(engine.run_turn(chat_id, make_turn("two", tools=())))
    assert failed.final.degradation == "envelope_malformed"
    assert (await store.load_chat(chat_id)).last_provider_state is None


async def test_a_turn_states_its_cost_and_sends_the_chats_hashed_cache_key(
    stack: tuple[EmulatedProviders, MemoryStore, TurnEngine, str],
) -> None:
    providers, _, engine, chat_id = stack
    outcome = await collect(engine.run_turn(chat_id, make_turn("hello", tools=())))
    final = outcome.final
    assert isinstance(final, TurnCompleted) and final.stats.cost is not None
    usage = final.stats.usage
    expected = (Decimal("2.50") * usage.uncached_input_tokens
                + Decimal("1.25") * usage.cached_input_tokens
                + Decimal(10) * usage.output_tokens) / 1_000_000
    assert final.stats.cost.total == expected > 0
    body: dict[str, Any] = providers.emulators["openai"].requests[-1].json
    assert body["prompt_cache_key"] == prompt_cache_key(chat_id)
    assert chat_id not in body["prompt_cache_key"]


async def test_an_unpriced_model_costs_none_and_off_sends_no_key(
    stack: tuple[EmulatedProviders, MemoryStore, TurnEngine, str],
) -> None:
    providers, _, engine, chat_id = stack
    outcome = await collect(engine.run_turn(chat_id, make_turn(
        "hello", provider="openai-compatible", model="llama-3.3-70b", tools=(),
        context=ContextSettings(cache="off"))))
    assert outcome.committed and outcome.final.stats.cost is None
    body = providers.emulators["openai-compatible"].requests[-1].json
    assert "prompt_cache_key" not in body


async def test_the_cost_benchmark_measures_savings_on_a_short_anthropic_chat() -> None:
    from benchmarks.bench_cost import run

    auto = await run("anthropic", "local_loop", "auto", 12)
    plain = await run("anthropic", "local_loop", "(a) no cache", 12)
    system_only = await run("anthropic", "local_loop", "(b) system only", 12)
    assert auto.costs[0] == plain.costs[0]  # a one-turn chat writes nothing
    assert auto.costs[-1] < system_only.costs[-1] < plain.costs[-1]
    assert min(auto.ratios[2:]) >= 0.9
    assert sum(u.cache_write_tokens for u in auto.usages) > 0
