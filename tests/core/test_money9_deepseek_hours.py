"""DeepSeek's rates by the hour of the day (money9): a request is priced by the UTC hour
it started, on each side of each boundary of DeepSeek's peak hours (01:00-04:00 and
06:00-10:00 UTC), and a request whose start is not known has no price."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal

import pytest

from turnstate.core import ConfigurationError
from turnstate.core._conversation import Usage
from turnstate.core._cost import ModelPrice, add_cost, turn_cost
from turnstate.core._prices import DEEPSEEK_RATES, PRICES
from turnstate.core._registry import DEFAULT_REGISTRY

USAGE = Usage(input_tokens=1_000_000, cached_input_tokens=400_000, output_tokens=1_000_000)
_MS = timedelta(milliseconds=1)


def _at(hour: int, minute: int = 0) -> datetime:
    return datetime(2026, 12, 1, hour, minute, tzinfo=UTC)


# (start of the request, peak?): each boundary, the instant before it and the instant at it
BOUNDARIES = [
    (_at(1) - _MS, False), (_at(1), True),
    (_at(4) - _MS, True), (_at(4), False),
    (_at(6) - _MS, False), (_at(6), True),
    (_at(10) - _MS, True), (_at(10), False),
    (_at(0), False), (_at(23, 59), False), (_at(12), False),
]


@pytest.mark.parametrize("name", ["deepseek-flash", "deepseek-v4-flash", "deepseek-v4-pro"])
@pytest.mark.parametrize(("started", "peak"), BOUNDARIES)
def test_a_deepseek_request_is_priced_by_the_hour_it_started(
    name: str, started: datetime, peak: bool,
) -> None:
    price = DEFAULT_REGISTRY.model("deepseek", name).price
    assert price is not None and price == PRICES["deepseek", name]
    off, high = DEEPSEEK_RATES[name]
    rates = high if peak else off
    # 600,000 uncached at the miss rate, 400,000 hits, 1,000,000 output
    expected = rates.input * Decimal("0.6") + rates.cached_input * Decimal("0.4") + rates.output
    cost = turn_cost(USAGE, price, started=started)
    assert cost is not None and cost.total == expected


def test_flash_at_the_documented_figures() -> None:
    price = PRICES["deepseek", "deepseek-flash"]
    off = turn_cost(USAGE, price, started=_at(0, 30))
    high = turn_cost(USAGE, price, started=_at(2))
    assert off is not None and high is not None
    assert off.as_json() == {"total": "0.6912", "input": "0.09", "cachedInput": "0.0012",
                             "cacheWrite": "0", "output": "0.6"}
    assert high.total == 2 * off.total


def test_the_hour_is_read_in_utc_whatever_the_timezone_given() -> None:
    """09:30 in Beijing (UTC+8) is 01:30 UTC: peak; 18:30 there is 10:30 UTC: off-peak."""
    beijing = timezone(timedelta(hours=8))
    price = PRICES["deepseek", "deepseek-v4-pro"]
    assert price.at(datetime(2026, 12, 1, 9, 30, tzinfo=beijing)) == price.peak
    assert price.at(datetime(2026, 12, 1, 18, 30, tzinfo=beijing)) != price.peak


@pytest.mark.parametrize("started", [None, datetime(2026, 12, 1, 2)])  # unknown, naive
def test_a_request_whose_start_is_not_known_has_no_price(started: datetime | None) -> None:
    price = PRICES["deepseek", "deepseek-v4-pro"]
    assert turn_cost(USAGE, price, started=started) is None
    assert add_cost(None, USAGE, price, started=started) is None


def test_a_price_not_by_the_hour_ignores_the_start() -> None:
    price = PRICES["openai", "gpt-4o"]
    assert turn_cost(USAGE, price) == turn_cost(USAGE, price, started=_at(2))


def test_a_turn_across_a_boundary_adds_each_request_at_its_own_rates() -> None:
    price = PRICES["deepseek", "deepseek-v4-pro"]
    first = turn_cost(USAGE, price, started=_at(5, 59))
    total = add_cost(first, USAGE, price, started=_at(6, 1))
    assert first is not None and total is not None
    assert total.total == first.total * 3  # off-peak once, then peak (twice off-peak)


@pytest.mark.parametrize("hours", [(), ((4, 1),), ((0, 25),), ((1.0, 4),), [(1, 4)]])
def test_peak_rates_need_well_formed_hours(hours: object) -> None:
    peak = ModelPrice(input="2", cached_input="1", output="4")
    with pytest.raises(ConfigurationError):
        ModelPrice(input="1", cached_input="0.5", output="2", peak=peak,
                   peak_hours_utc=hours)  # type: ignore[arg-type]


def test_hours_without_peak_rates_and_nested_peaks_are_refused() -> None:
    with pytest.raises(ConfigurationError):
        ModelPrice(input="1", cached_input="0.5", output="2", peak_hours_utc=((1, 4),))
    nested = PRICES["deepseek", "deepseek-v4-pro"]
    with pytest.raises(ConfigurationError):
        ModelPrice(input="1", cached_input="0.5", output="2", peak=nested,
                   peak_hours_utc=((1, 4),))
