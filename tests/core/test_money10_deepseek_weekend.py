"""DeepSeek's peak hours are Monday to Friday only (money10).

DeepSeek's pricing page (since 2026-08-23): "Peak hours are 01:00 - 04:00 and 06:00 -
10:00 UTC, Monday through Friday, excluding Chinese public holidays. All other hours are
off-peak, including weekends and Chinese public holidays in full." Weekends were priced
like weekdays: a Saturday request at 02:00 UTC cost twice its bill.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta, timezone

import attrs
import pytest

from turnstate.core._conversation import Usage
from turnstate.core._cost import ModelPrice, turn_cost
from turnstate.core._errors import ConfigurationError
from turnstate.core._prices import DEEPSEEK_PRICED, PRICES

# 2026-12-04 is a Friday, 12-05 a Saturday, 12-06 a Sunday, 12-07 a Monday.
FRIDAY, SATURDAY, SUNDAY, MONDAY = (date(2026, 12, day) for day in (4, 5, 6, 7))


def at(day: date, hour: int, minute: int = 0) -> datetime:
    return datetime(day.year, day.month, day.day, hour, minute, tzinfo=UTC)


@pytest.mark.parametrize("name", DEEPSEEK_PRICED)
@pytest.mark.parametrize("hour", [1, 3, 6, 9])
def test_a_weekend_request_in_the_peak_hours_is_off_peak(name: str, hour: int) -> None:
    price = PRICES["deepseek", name]
    assert price.at(at(FRIDAY, hour)) == price.peak
    assert price.at(at(MONDAY, hour)) == price.peak
    for day in (SATURDAY, SUNDAY):  # before: price.peak
        off_peak = price.at(at(day, hour, 30))
        assert off_peak is not None and off_peak.peak is None
        assert off_peak.input == price.input and off_peak.output == price.output


def test_the_weekday_is_the_utc_one_which_is_beijings_in_the_peak_hours() -> None:
    price = PRICES["deepseek", "deepseek-flash"]
    beijing = timezone(timedelta(hours=8))
    # Monday 09:30 in Beijing is Monday 01:30 UTC: peak. Saturday 17:59 there: off-peak.
    assert price.at(datetime(2026, 12, 7, 9, 30, tzinfo=beijing)) == price.peak
    assert price.at(datetime(2026, 12, 5, 17, 59, tzinfo=beijing)) != price.peak
    # Friday 23:30 UTC is Saturday in Beijing, and off-peak either way.
    assert price.at(at(FRIDAY, 23, 30)) != price.peak


def test_a_weekend_turn_costs_the_off_peak_rates() -> None:
    usage = Usage(input_tokens=10_000, cached_input_tokens=8_000, output_tokens=500)
    price = PRICES["deepseek", "deepseek-flash"]
    weekday = turn_cost(usage, price, started=at(FRIDAY, 2))
    weekend = turn_cost(usage, price, started=at(SATURDAY, 2))
    assert weekday is not None and weekend is not None
    assert weekday.total == 2 * weekend.total
    # 2,000 misses at $0.15, 8,000 hits at $0.003, 500 output at $0.60 per million.
    assert str(weekend.total.normalize()) == "0.000624"


def test_holidays_an_embedder_lists_are_off_peak() -> None:
    price = PRICES["deepseek", "deepseek-v4-pro"]
    holiday = attrs.evolve(price, off_peak_dates=frozenset({MONDAY}))
    assert holiday.at(at(MONDAY, 2)) != holiday.peak
    assert holiday.at(at(FRIDAY, 2)) == holiday.peak


def test_a_price_without_weekdays_keeps_every_day_peak() -> None:
    off = ModelPrice(input="1", cached_input="0.1", output="2")
    price = attrs.evolve(off, peak=attrs.evolve(off, input="2"), peak_hours_utc=((1, 4),))
    assert price.at(at(SUNDAY, 2)) == price.peak


@pytest.mark.parametrize("change", [
    {"peak_weekdays": (0,)}, {"peak_weekdays": (8,)}, {"peak_weekdays": [1, 2]},
    {"peak_weekdays": (True,)}, {"off_peak_dates": {MONDAY}},
    {"off_peak_dates": frozenset({at(MONDAY, 0)})}, {"off_peak_dates": frozenset({"2026-12-07"})},
])
def test_malformed_weekdays_or_dates_are_refused(change: dict[str, object]) -> None:
    with pytest.raises(ConfigurationError):
        attrs.evolve(PRICES["deepseek", "deepseek-flash"], **change)
