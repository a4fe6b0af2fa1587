"""The demo calculator refuses results too large to be worth computing.

Its exponent bound (64) held each power small, but powers of powers grow as a tower:
``(((9**64)**64)**64)**64`` is a 53-million-bit integer, 30 s of CPU on the event loop
that every stream of the server shares (and one more ``**64`` would not end). A float
that overflows raised a bare ``OverflowError``.
"""

from __future__ import annotations

import time

import pytest

from turnstate.server._tools import CalculatorError, calculate


@pytest.mark.parametrize("expression", [
    "(((9**64)**64)**64)**64", "((9**64)**64)**64", "(2**64)**64 * (2**64)**64",
    "1e300**64", "(2**64)**64 * 1.0 ** 2 * 10.0**300 * 10.0**300",
])
def test_a_result_beyond_the_bound_is_refused_at_once(expression: str) -> None:
    started = time.process_time()
    with pytest.raises(CalculatorError):
        calculate(expression)
    assert time.process_time() - started < 0.5


def test_ordinary_arithmetic_still_answers() -> None:
    assert calculate("2**64") == 2**64
    assert calculate("(9**64)**4") == 9**256
    assert calculate("2**-3 + 1e300 * 10") == 0.125 + 1e301
    assert calculate("(-1)**63 * 0**5 + 1**64") == 1


def test_a_complex_result_is_refused() -> None:
    with pytest.raises(CalculatorError):
        calculate("(-8) ** 0.5")
