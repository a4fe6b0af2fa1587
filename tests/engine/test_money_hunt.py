"""Money hunt (2026-12-04): what a turn bills, against the emulators over loopback."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from decimal import Decimal

import attrs
import pytest

from tests.engine.support import collect, tool
from turnstate.core._conversation import MessageStatus, Usage
from turnstate.core._cost import audit_cost, usd_text
from turnstate.core._events import TurnAborted, TurnCompleted
from turnstate.core._prices import PRICES
from turnstate.core._registry import DEFAULT_REGISTRY, ModelInfo
from turnstate.emulators import EmulatedProviders, Fault
from turnstate.emulators._emulated import EMULATOR_API_KEY
from turnstate.engine import TurnEngine, TurnInput
from turnstate.engine._follow import synthesized_final
from turnstate.providers._protocol import ProviderCall
from turnstate.providers._transport import AiohttpTransport
from turnstate.providers.anthropic._stream import _Block, assemble
from turnstate.providers.chat_completions._codec import ChatCompletionsAdapter
from turnstate.storage import MemoryStore, decode_audit

SONNET_PRICE = PRICES["anthropic", "claude-sonnet-4-6"]
COMPACTING = ModelInfo(provider="anthropic", name="priced-compacting", context_limit=64_000,
                       compaction=True, price=SONNET_PRICE)
REGISTRY = DEFAULT_REGISTRY.with_model(COMPACTING)
PASTE = "Notes of the trip: " + "walked the old town, took the tram to the river. " * 4_300


@attrs.define
class Stack:
    providers: EmulatedProviders
    engine: TurnEngine
    store: MemoryStore
    chat_id: str


@pytest.fixture
async def stack() -> AsyncIterator[Stack]:
    async with EmulatedProviders(["anthropic", "openai"]) as providers, \
            AiohttpTransport() as transport:
        store = MemoryStore()
        engine = TurnEngine(store, providers.adapters, transport, registry=REGISTRY)
        chat = await store.create_chat(owner="alice")
        yield Stack(providers, engine, store, chat.id)


async def test_a_compacting_turn_bills_the_summarising_step(stack: Stack) -> None:
    """Anthropic bills the compaction step (``usage.iterations`` of type ``compaction``)
    apart from the top-level usage, which counts only the compacted context: the turn's
    usage and cost include it (they left it out: the turn cost a fraction of its bill)."""
    turn = TurnInput(provider="anthropic", model=COMPACTING.name, system_prompt="Be brief.",
                     user_text=PASTE)
    final = (await collect(stack.engine.run_turn(stack.chat_id, turn))).events[-1]
    assert isinstance(final, TurnCompleted)
    sent = stack.providers.emulators["anthropic"].requests
    assert len(sent) == 1
    assert len(json.dumps(sent[0].json)) > 200_000
    usage = final.stats.usage
    assert usage.input_tokens > 50_000  # the step read the whole paste
    billed = (SONNET_PRICE.input * usage.uncached_input_tokens
              + SONNET_PRICE.cached_input * usage.cached_input_tokens
              + SONNET_PRICE.output * usage.output_tokens) / 1_000_000
    assert final.stats.cost is not None and final.stats.cost.total == billed
    assert final.stats.cost.total > Decimal("0.15")


def test_a_compaction_step_is_billed_with_its_cache_figures_even_without_a_summary() -> None:
    """Each ``compaction`` iteration is read as a top-level usage is; a block that came
    back without its summary (a failed compaction) still ran, so it still bills."""
    usage = {"input_tokens": 10, "output_tokens": 5, "iterations": [
        {"type": "compaction", "input_tokens": 1000, "cache_read_input_tokens": 9000,
         "cache_creation_input_tokens": 0, "output_tokens": 300},
        {"type": "message", "input_tokens": 10, "output_tokens": 5}]}
    blocks = {0: _Block({"type": "compaction", "content": None}),
              1: _Block({"type": "text", "text": "hi"})}
    response = assemble("anthropic", response_id="m", model="x", blocks=blocks, usage=usage,
                        stop_reason="end_turn", stop_details=None)
    assert response.usage.input_tokens == 10 and "compacted" not in response.metadata
    assert response.billed_apart == Usage(input_tokens=10_000, cached_input_tokens=9000,
                                          output_tokens=300)


@pytest.mark.parametrize(("provider", "model"), [("anthropic", "claude-sonnet-4-5"),
                                                 ("openai", "gpt-4o")])
async def test_a_turn_aborted_after_billed_requests_keeps_its_cost(
    stack: Stack, provider: str, model: str,
) -> None:
    """A tool loop that hits the iteration limit has billed every request it sent: its
    aborted answer keeps the turn's usage and an audit with ``costUsd`` (the chat's cost
    left it out: the store wrote neither)."""
    turn = TurnInput(provider=provider, model=model, system_prompt="Be brief.",
                     user_text="[[call:weather]][[rounds:30]]", tools=(tool("weather"),))
    final = (await collect(stack.engine.run_turn(stack.chat_id, turn))).events[-1]
    assert isinstance(final, TurnAborted) and final.reason == "tool_iteration_limit"
    assert final.stats.requests > 1 and final.stats.cost is not None
    answer = (await stack.store.list_messages(stack.chat_id))[-1]
    assert answer.status is MessageStatus.ABORTED
    assert answer.usage == final.stats.usage
    assert audit_cost(answer.provider_state) == usd_text(final.stats.cost.total)
    audit = decode_audit(answer.provider_state or "")
    assert audit.cursor is None and audit.metadata is not None
    assert audit.metadata["sent"]["requests"] == final.stats.requests
    # The chat's next turn is unaffected: no cursor came from the aborted turn.
    assert (await stack.store.load_chat(stack.chat_id)).last_provider_state is None


async def test_a_turn_aborted_before_any_answer_writes_no_usage(stack: Stack) -> None:
    stack.providers.emulators["openai"].faults.push(Fault(status=400, body={"error": {
        "message": "bad", "type": "invalid_request_error", "code": None}}))
    turn = TurnInput(provider="openai", model="gpt-4o", system_prompt="Be brief.",
                     user_text="hello")
    final = (await collect(stack.engine.run_turn(stack.chat_id, turn))).events[-1]
    assert isinstance(final, TurnAborted)
    answer = (await stack.store.list_messages(stack.chat_id))[-1]
    assert (answer.usage, answer.provider_state) == (None, None)


async def test_a_gemini_pro_turn_above_200k_tokens_costs_the_long_context_rates() -> None:
    """Over loopback: a Gemini 2.5 Pro turn whose prompt is above 200,000 tokens is
    priced at the long-context tier, request by request (it was priced at the short
    one: half the input and two thirds of the output rate)."""
    price = PRICES["gemini", "gemini-2.5-pro"]
    async with EmulatedProviders(["gemini"]) as providers, AiohttpTransport() as transport:
        store = MemoryStore()
        engine = TurnEngine(store, providers.adapters, transport)
        chat = await store.create_chat(owner="alice")
        turn = TurnInput(provider="gemini", model="gemini-2.5-pro", system_prompt="Be brief.",
                         user_text=PASTE * 4 + " [[call:weather]]", tools=(tool("weather"),))
        final = (await collect(engine.run_turn(chat.id, turn))).events[-1]
    assert isinstance(final, TurnCompleted) and final.stats.requests == 2
    usage = final.stats.usage
    assert usage.input_tokens > 2 * 200_000
    assert final.stats.cost is not None
    assert final.stats.cost.input == price.long_input * usage.uncached_input_tokens / 1_000_000
    assert final.stats.cost.output == price.long_output * usage.output_tokens / 1_000_000


class _UsageIgnored(ChatCompletionsAdapter):
    """A server that ignores ``stream_options.include_usage``: no usage chunk comes."""

    def body(self, call: ProviderCall) -> bytes:
        return super().body(call).replace(b',"stream_options":{"include_usage":true}', b"")


async def test_a_response_without_usage_leaves_the_turn_without_a_cost() -> None:
    """A priced model whose server sent no usage was billed, but the turn said it cost
    $0 (every count zero): its cost is now unknown (None), and the audit says why."""
    async with EmulatedProviders(["openai-compatible"]) as providers, \
            AiohttpTransport() as transport:
        adapters = {**providers.adapters, "openai-compatible": _UsageIgnored(
            base_url=providers.base_url("openai-compatible"), api_key=EMULATOR_API_KEY)}
        store = MemoryStore()
        engine = TurnEngine(store, adapters, transport)
        chat = await store.create_chat(owner="alice")
        turn = TurnInput(provider="openai-compatible", model="gpt-4o-mini",
                         system_prompt="Be brief.", user_text="hello [[call:weather]]",
                         tools=(tool("weather"),))
        final = (await collect(engine.run_turn(chat.id, turn))).events[-1]
        assert isinstance(final, TurnCompleted) and final.stats.requests == 2
        assert final.stats.usage == Usage() and final.stats.cost is None
        answer = (await store.list_messages(chat.id))[-1]
        audit = decode_audit(answer.provider_state or "")
        assert audit.metadata is not None and audit.metadata["usageMissing"] is True
        assert "costUsd" not in audit.metadata
        # The same chat with usage reported is priced again.
        engine = TurnEngine(store, providers.adapters, transport)
        again = (await collect(engine.run_turn(chat.id, turn))).events[-1]
        assert isinstance(again, TurnCompleted) and again.stats.cost is not None


async def test_a_turn_answered_from_the_store_reports_the_stats_it_stored(
    stack: Stack,
) -> None:
    """A retried turn id (and a resumed turn's rebuilt final event) came back with zero
    stats: no requests, no usage, no cost, though the answer stores its usage and its
    audit ``sent`` and ``costUsd``. Both final events now carry them, aborted ones too."""
    turn = TurnInput(provider="anthropic", model="claude-sonnet-4-5", turn_id="t-money-1",
                     system_prompt="Be brief.", user_text="[[call:weather]]",
                     tools=(tool("weather"),))
    first = (await collect(stack.engine.run_turn(stack.chat_id, turn))).events[-1]
    again = (await collect(stack.engine.run_turn(stack.chat_id, turn))).events[-1]
    assert isinstance(first, TurnCompleted) and isinstance(again, TurnCompleted)
    assert first.stats.cost is not None and first.stats.requests == 2
    assert again.stats == first.stats
    looped = attrs.evolve(turn, turn_id="t-money-2", user_text="[[call:weather]][[rounds:30]]")
    aborted = (await collect(stack.engine.run_turn(stack.chat_id, looped))).events[-1]
    assert isinstance(aborted, TurnAborted) and aborted.stats.cost is not None
    rebuilt = await synthesized_final(stack.store, stack.chat_id, "t-money-2")
    assert isinstance(rebuilt, TurnAborted) and rebuilt.stats == aborted.stats
