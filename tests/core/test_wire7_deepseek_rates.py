"""DeepSeek's documented rates are kept as data with their source (wire7), peak and
off-peak; money9 attached them to the registry, each request priced by its start."""

from __future__ import annotations

from decimal import Decimal

from turnstate.core._prices import (
    DEEPSEEK_PEAK_HOURS_UTC,
    DEEPSEEK_PRICING,
    DEEPSEEK_RATES,
    PRICES,
)
from turnstate.core._registry import DEFAULT_REGISTRY


def test_deepseek_rates_are_documented_and_peak_is_twice_off_peak() -> None:
    off_peak = DEEPSEEK_RATES["deepseek-flash"][0]
    assert (off_peak.input, off_peak.cached_input, off_peak.output) == (
        Decimal("0.15"), Decimal("0.003"), Decimal("0.60"))
    for name, (low, high) in DEEPSEEK_RATES.items():
        assert low.source == high.source == DEEPSEEK_PRICING, name
        assert low.read_on and high.read_on == low.read_on
        assert (high.input, high.cached_input, high.output) == (
            low.input * 2, low.cached_input * 2, low.output * 2)
    assert DEEPSEEK_RATES["deepseek-v4-pro"][1].cached_input == Decimal("0.044")
    assert DEEPSEEK_PEAK_HOURS_UTC == ((1, 4), (6, 10))


def test_the_registry_prices_deepseek_by_the_hour_and_an_embedder_can_set_one() -> None:
    """money9 attached the rates: off-peak with the peak rates and hours beside them."""
    price = DEFAULT_REGISTRY.model("deepseek", "deepseek-v4-pro").price
    assert price == PRICES["deepseek", "deepseek-v4-pro"]
    assert price is not None and (price.input, price.peak) == (
        DEEPSEEK_RATES["deepseek-v4-pro"][0].input, DEEPSEEK_RATES["deepseek-v4-pro"][1])
    assert price.peak_hours_utc == DEEPSEEK_PEAK_HOURS_UTC
    peak = DEEPSEEK_RATES["deepseek-v4-pro"][1]
    priced = DEFAULT_REGISTRY.with_price("deepseek", "deepseek-v4-pro", peak)
    assert priced.model("deepseek", "deepseek-v4-pro").price == peak
