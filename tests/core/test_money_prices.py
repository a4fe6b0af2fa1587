"""Money hunt (2026-12-04): list prices that would be wrong are left out."""

from __future__ import annotations

from decimal import Decimal

import pytest

from turnstate.core._conversation import Usage
from turnstate.core._cost import ModelPrice, add_cost, turn_cost
from turnstate.core._errors import ConfigurationError
from turnstate.core._registry import DEFAULT_REGISTRY


@pytest.mark.parametrize("model", ["deepseek-chat", "deepseek-reasoner"])
def test_deepseek_names_off_the_pricing_page_have_no_list_price(model: str) -> None:
    """deepseek-chat and deepseek-reasoner are not on DeepSeek's pricing page (they
    carried V3.2's price, retired in April 2026): none is guessed. The names the page
    lists are priced by the hour (money9: ``tests/core/test_money9_deepseek_hours.py``)."""
    assert DEFAULT_REGISTRY.model("deepseek", model).price is None


PRO = DEFAULT_REGISTRY.model("gemini", "gemini-2.5-pro").price


def test_a_gemini_pro_prompt_above_200k_tokens_bills_at_the_long_context_rates() -> None:
    """Gemini 2.5 Pro bills a request whose prompt (cached part included) is above
    200,000 tokens at $2.50 / $0.25 / $15 instead of $1.25 / $0.125 / $10."""
    assert PRO is not None
    long = turn_cost(Usage(input_tokens=250_000, cached_input_tokens=50_000,
                           output_tokens=1_000), PRO)
    assert long is not None
    assert (long.input, long.cached_input, long.output) == (
        Decimal("0.5"), Decimal("0.0125"), Decimal("0.015"))
    short = turn_cost(Usage(input_tokens=200_000, output_tokens=1_000), PRO)
    assert short is not None and (short.input, short.output) == (Decimal("0.25"),
                                                                 Decimal("0.01"))


def test_a_turn_prices_each_request_at_its_own_tier() -> None:
    """The tier is chosen per request, so a turn's cost is the sum of its requests'
    (pricing the turn's summed usage put both requests in the long tier)."""
    assert PRO is not None
    first = Usage(input_tokens=150_000, output_tokens=100)
    second = Usage(input_tokens=210_000, output_tokens=100)
    total = add_cost(add_cost(None, first, PRO), second, PRO)
    parts = [turn_cost(first, PRO), turn_cost(second, PRO)]
    assert total is not None and None not in parts
    assert total.total == sum((c.total for c in parts if c is not None), Decimal(0))
    assert total.input == Decimal("0.1875") + Decimal("0.525")
    assert add_cost(None, first, None) is None


@pytest.mark.parametrize("changes", [{"long_context_tokens": 200_000},
                                     {"long_input": "2.5", "long_output": "15"},
                                     {"long_context_tokens": 0, "long_input": "1",
                                      "long_cached_input": "1", "long_output": "1"}])
def test_long_context_rates_come_whole_or_not_at_all(changes: dict[str, object]) -> None:
    with pytest.raises(ConfigurationError, match="long"):
        ModelPrice(input="1", cached_input="0.1", output="2", **changes)  # type: ignore[arg-type]


def test_every_anthropic_model_of_the_registry_is_priced_and_has_a_cache_minimum() -> None:
    """claude-opus-4-6 had neither: an unpriced turn, and breakpoints placed on prefixes
    of any length (no Anthropic model caches below 1,024 tokens)."""
    for (provider, _), info in DEFAULT_REGISTRY.models.items():
        if provider == "anthropic":
            assert info.price is not None, info.name
            assert info.min_cache_tokens >= 1024, info.name
    opus = DEFAULT_REGISTRY.model("anthropic", "claude-opus-4-6").price
    assert opus is not None and (opus.input, opus.output, opus.cache_write("1h")) == (
        Decimal(5), Decimal(25), Decimal(10))


def test_a_dated_snapshot_billed_apart_from_its_alias_has_no_price() -> None:
    """gpt-4o-2024-05-13 is a dated name of gpt-4o to ``is_snapshot_of``, but OpenAI
    bills it at $5 input and $15 output with no cache discount, twice gpt-4o's $2.50 /
    $10: it inherited gpt-4o's price. It is unpriced now (no price rather than a wrong
    one); the other dated gpt-4o names bill as gpt-4o and keep its price."""
    assert DEFAULT_REGISTRY.model("openai", "gpt-4o-2024-05-13").price is None
    august = DEFAULT_REGISTRY.model("openai", "gpt-4o-2024-08-06")
    assert august.price is not None
    assert august.price == DEFAULT_REGISTRY.model("openai", "gpt-4o").price
