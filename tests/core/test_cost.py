"""Prices as data, a turn's cost as Decimals, and the usage fields it reads."""

from __future__ import annotations

from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from turnstate.core import DEFAULT_REGISTRY, ModelPrice, TurnCost, Usage, turn_cost
from turnstate.core._cost import usd_text
from turnstate.core._prices import MIN_CACHE_TOKENS, PRICES


def test_a_turn_bills_reads_writes_and_plain_input_at_their_own_rates() -> None:
    price = DEFAULT_REGISTRY.model("anthropic", "claude-sonnet-4-5").price
    usage = Usage(input_tokens=10_000, cached_input_tokens=6_000, cache_write_tokens=3_000,
                  output_tokens=500)
    cost = turn_cost(usage, price)
    assert cost == TurnCost(input=Decimal("0.003"), cached_input=Decimal("0.0018"),
                            cache_write=Decimal("0.01125"), output=Decimal("0.0075"))
    assert cost.total == Decimal("0.02355")
    one_hour = turn_cost(usage, price, ttl="1h")
    assert one_hour is not None and one_hour.cache_write == Decimal("0.018")


def test_an_unpriced_model_has_no_cost_not_a_guess() -> None:
    info = DEFAULT_REGISTRY.model("openai-compatible", "llama-3.3-70b")
    assert info.price is None
    assert turn_cost(Usage(input_tokens=1000, output_tokens=10), info.price) is None
    assert DEFAULT_REGISTRY.model("anthropic", "claude-nonexistent").price is None


def test_an_embedder_overrides_a_price_and_prices_an_unknown_model() -> None:
    mine = ModelPrice(input="1", cached_input="0.1", output="2", source="contract 7",
                      read_on="2026-12-01")
    registry = DEFAULT_REGISTRY.with_price("openai", "gpt-4o", mine)
    assert registry.model("openai", "gpt-4o").price == mine
    assert registry.model("openai", "gpt-4o").context_limit == 128_000
    assert DEFAULT_REGISTRY.model("openai", "gpt-4o").price != mine
    custom = registry.with_price("openai-compatible", "my-model", mine)
    cost = turn_cost(Usage(input_tokens=1_000_000), custom.model("openai-compatible",
                                                                "my-model").price)
    assert cost is not None and cost.total == Decimal(1)


def test_every_price_names_its_source_and_date() -> None:
    for key, price in PRICES.items():
        assert price.source.startswith("https://"), key
        assert len(price.read_on) == 10, key
        assert price.cached_input < price.input, key
        assert DEFAULT_REGISTRY.model(*key).price == price


def test_anthropic_models_carry_their_minimum_cacheable_length() -> None:
    assert DEFAULT_REGISTRY.model("anthropic", "claude-haiku-4-5").min_cache_tokens == 4096
    assert DEFAULT_REGISTRY.model("anthropic", "claude-sonnet-4-5").min_cache_tokens == 1024
    assert DEFAULT_REGISTRY.model("anthropic", "unknown").min_cache_tokens == 1024
    assert DEFAULT_REGISTRY.model("openai", "gpt-4o").min_cache_tokens == 0
    assert set(MIN_CACHE_TOKENS) <= {k for k in PRICES if k[0] == "anthropic"}


def test_writes_without_a_write_rate_bill_as_input() -> None:
    price = ModelPrice(input="2", cached_input="0.5", output="8")
    cost = turn_cost(Usage(input_tokens=1000, cache_write_tokens=1000), price)
    assert cost is not None and cost.cache_write == Decimal("0.002")


def test_usage_adds_cache_writes_and_knows_its_uncached_part() -> None:
    total = Usage(input_tokens=100, cached_input_tokens=30, cache_write_tokens=20) + Usage(
        input_tokens=50, cache_write_tokens=5)
    assert total.cache_write_tokens == 25
    assert total.uncached_input_tokens == 95


@pytest.mark.parametrize("ttl", ["5m", "1h"])
def test_cost_json_is_exact_strings(ttl: str) -> None:
    price = DEFAULT_REGISTRY.model("anthropic", "claude-haiku-4-5").price
    cost = turn_cost(Usage(input_tokens=3, output_tokens=1), price, ttl=ttl)
    assert cost is not None
    assert cost.as_json() == {"total": "0.000008", "input": "0.000003", "cachedInput": "0",
                              "cacheWrite": "0", "output": "0.000005"}


_ZEROS = st.sampled_from([Decimal("0"), Decimal("0E-12"), Decimal("0.000"), Decimal("-0"),
                          Decimal("-0E+3"), Decimal("0E+5")])


@given(st.decimals(allow_nan=False, allow_infinity=False) | _ZEROS)
def test_usd_text_is_the_normalised_plain_text(amount: Decimal) -> None:
    """A zero cost is written ``0`` without normalising it; every amount as before."""
    assert usd_text(amount) == format(amount.normalize(), "f")
