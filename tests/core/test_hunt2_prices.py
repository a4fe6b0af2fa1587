"""A ``ModelPrice`` that is not a finite, non-negative rate of sane size is a
``ConfigurationError`` when it is made, not a turn's failure.

``ModelPrice`` converted anything ``Decimal`` takes: ``sNaN``, ``Infinity`` and
``1e999999`` aborted every turn of the model ``internal_error`` after the provider had
answered (and billed): ``InvalidOperation`` or ``Overflow`` out of ``turn_cost``; ``NaN``
and a negative rate committed NaN or negative costs; text that is not a number raised
``decimal.InvalidOperation`` from the constructor.
"""

from __future__ import annotations

from decimal import Decimal

import pytest

from turnstate.core import ConfigurationError, ModelPrice, Usage, turn_cost


@pytest.mark.parametrize("field", ["input", "cached_input", "output", "cache_write_5m",
                                   "cache_write_1h"])
@pytest.mark.parametrize("rate", ["NaN", "sNaN", "Infinity", "-Infinity", float("nan"),
                                  "-1", "-0.001", "1e999999", "10000001", "abc", "", True])
def test_a_rate_that_cannot_price_a_turn_is_refused(field: str, rate: object) -> None:
    rates: dict[str, object] = {"input": "1", "cached_input": "0.1", "output": "2", field: rate}
    with pytest.raises(ConfigurationError, match=field):
        ModelPrice(**rates)  # type: ignore[arg-type]


@pytest.mark.parametrize("rate", ["0", 0, "0.000001", 3, 2.5, Decimal("75"), "1000000"])
def test_a_finite_rate_prices_a_turn(rate: object) -> None:
    price = ModelPrice(input=rate, cached_input=rate, output=rate,  # type: ignore[arg-type]
                       cache_write_5m=rate, cache_write_1h=None)
    usage = Usage(input_tokens=10**15, output_tokens=10**15, cached_input_tokens=10**14,
                  cache_write_tokens=10**14)
    cost = turn_cost(usage, price)
    assert cost is not None
    assert cost.total.is_finite() and cost.total >= 0
