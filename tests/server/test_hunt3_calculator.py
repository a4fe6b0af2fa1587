"""The demo calculator refuses a float result past a float's range.

A float product or sum that overflows is infinity without an ``OverflowError``
(``1e308 * 10``), a literal ``1e999`` reads as infinity, and infinity minus itself is
NaN: the tool answered ``inf`` or ``nan`` as its result (not JSON; the model got a
Python dict's text). Each is now the tool error of a result too large.
"""

from __future__ import annotations

import json

import pytest

from turnstate.core._conversation import ToolCallPart
from turnstate.engine._tools import run_tool
from turnstate.server._tools import DEMO_TOOLS, CalculatorError, calculate

OVERFLOWING = ["1e308*10", "1e308+1e308", "-1e308-1e308", "1e308*-10", "1e999", "-1e999",
               "1e308*10-1e308*10", "(1e308*10)*0", "1e200*1e200/1e200"]


@pytest.mark.parametrize("expression", OVERFLOWING)
def test_a_float_past_its_range_is_refused(expression: str) -> None:
    with pytest.raises(CalculatorError, match="the result is too large"):
        calculate(expression)


def refuse(name: str) -> None:
    raise ValueError(name)


@pytest.mark.parametrize("expression", OVERFLOWING)
async def test_the_tool_answers_an_error_the_model_can_read(expression: str) -> None:
    call = ToolCallPart(call_id="c1", name="calculator",
                        arguments=json.dumps({"expression": expression}))
    result = await run_tool(call, DEMO_TOOLS["calculator"])
    assert result.is_error
    error = json.loads(result.output, parse_constant=refuse)["error"]
    assert "the result is too large" in error


def test_the_largest_finite_floats_still_answer() -> None:
    assert calculate("1e308") == 1e308
    assert calculate("-1.7e308 + 1e300") == -1.7e308 + 1e300
    assert calculate("1e308 * 1.5") == 1e308 * 1.5
