"""Cache writes priced by the lifetime the provider reports, and a long-context tier's
own rates (money4).

Anthropic's usage splits its cache writes by lifetime (``cache_creation``:
``ephemeral_5m_input_tokens`` at 1.25x the input rate, ``ephemeral_1h_input_tokens`` at
2x). The parser read only the total and the cost priced all of it at the lifetime the
engine's policy asked for, so a request that wrote both (one-hour breakpoints before
five-minute ones, as the ``adaptive`` policy sends) was billed at one rate. A tier's rate
of 0 read as "no tier" (``or``), and a write without a rate of its own was billed at the
short tier's input rate in the long tier.
"""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import pytest

from tests.helpers import chunk_events
from turnstate.core._conversation import Usage
from turnstate.core._cost import ModelPrice, turn_cost
from turnstate.core._registry import DEFAULT_REGISTRY
from turnstate.providers._protocol import SseEvent
from turnstate.providers.anthropic import AnthropicStreamParser
from turnstate.storage._record_encoders import encode_usage
from turnstate.storage._records import decode_usage

SONNET = DEFAULT_REGISTRY.model("anthropic", "claude-sonnet-4-5").price
SPLIT = {"ephemeral_5m_input_tokens": 400, "ephemeral_1h_input_tokens": 600}


def _with_split(event: SseEvent) -> SseEvent:
    data = json.loads(event.data)
    usage = data.get("message", {}).get("usage") if data.get("type") == "message_start" \
        else data.get("usage")
    if usage is None:
        return event
    usage.update(cache_creation_input_tokens=1000, cache_read_input_tokens=2000)
    if "cache_creation" in usage:  # message_start's (message_delta carries none)
        usage["cache_creation"] = SPLIT
    return SseEvent(data=json.dumps(data), event=event.event, id=event.id)


def test_a_recorded_stream_with_one_hour_writes_bills_them_at_twice_the_input_rate(
        recorded_dir: Path) -> None:
    parser = AnthropicStreamParser()
    for event in chunk_events(recorded_dir / "anthropic/anthropic-json-tool.1.chunks.txt"):
        parser.feed(_with_split(event))
        if parser.done:
            break
    usage = parser.finish().usage
    assert (usage.cache_write_tokens, usage.cache_write_1h_tokens) == (1000, 600)
    cost = turn_cost(usage, SONNET)  # the policy's lifetime: 5m
    assert cost is not None
    # 849 in at $3, 2,000 read at $0.30, 400 written at $3.75 and 600 at $6, 47 out at $15
    assert cost.cache_write == Decimal("0.0051")  # before: 1,000 at $3.75, $0.00375
    assert cost.total == Decimal("0.002547") + Decimal("0.0006") + Decimal("0.0051") \
        + Decimal("0.000705")


def test_a_usage_without_the_split_is_priced_at_the_policys_lifetime() -> None:
    usage = Usage(input_tokens=1000, cache_write_tokens=1000)
    five, hour = turn_cost(usage, SONNET), turn_cost(usage, SONNET, ttl="1h")
    assert five is not None and five.cache_write == Decimal("0.00375")
    assert hour is not None and hour.cache_write == Decimal("0.006")


def test_the_split_survives_the_store() -> None:
    usage = Usage(input_tokens=10, cache_write_tokens=5, cache_write_1h_tokens=3)
    assert decode_usage(encode_usage(usage)) == usage
    plain = Usage(input_tokens=10, cache_write_tokens=5)
    assert decode_usage(encode_usage(plain)) == plain
    # A usage stored before the field existed reads 0.
    assert decode_usage('{"inputTokens":1,"outputTokens":2,"cachedInputTokens":0,'
                        '"reasoningTokens":0,"cacheHitTokens":null,"cacheMissTokens":null,'
                        '"cacheWriteTokens":0}') == Usage(input_tokens=1, output_tokens=2)
    assert (usage + usage).cache_write_1h_tokens == 6


TIERED = ModelPrice(input="1", cached_input="0.1", output="4", long_context_tokens=1000,
                    long_input="2", long_cached_input="0", long_output="8")


def test_a_long_tier_rate_of_zero_is_its_rate() -> None:
    cost = turn_cost(Usage(input_tokens=3000, cached_input_tokens=2000), TIERED)
    assert cost is not None and cost.cached_input == 0  # before: 2,000 at $0.1, $0.0002
    assert cost.input == Decimal("0.002")


def test_a_write_without_its_own_rate_bills_the_tiers_input_rate() -> None:
    cost = turn_cost(Usage(input_tokens=3000, cache_write_tokens=1000), TIERED)
    assert cost is not None and cost.cache_write == Decimal("0.002")  # before: $0.001


@pytest.mark.parametrize(("provider", "name", "priced_as"), [
    ("openai", "gpt-4o-mini-2024-07-18", "gpt-4o-mini"), ("openai", "gpt-4.1-2025-04-14",
                                                          "gpt-4.1"),
    ("openai", "gpt-4o-2024-05-13", None), ("openai", "gpt-5.1-codex", None),
    ("openai", "o3-mini", None), ("openai-compatible", "openai/gpt-4o", None),
    ("anthropic", "claude-opus-4-20250514", None), ("anthropic", "claude-sonnet-4-20250514", None),
    ("anthropic", "claude-3-5-haiku-latest", None),
    ("gemini", "gemini-2.5-flash-lite-preview-06-17", None), ("deepseek", "deepseek-chat", None)])
def test_an_unlisted_or_routed_name_gets_no_other_models_price(
        provider: str, name: str, priced_as: str | None) -> None:
    """Audit (passes on the code before): a dated snapshot bills as its model, any
    other name the registry does not list, or lists unpriced, has no price at all."""
    price = DEFAULT_REGISTRY.model(provider, name).price
    assert price == (DEFAULT_REGISTRY.model(provider, priced_as).price if priced_as else None)
