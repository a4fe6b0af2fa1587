"""A ``Tool.timeout`` that is not a positive number of seconds is ``InvalidInput``
naming the tool, before the lease.

A string became the model's tool error mid-turn (``asyncio.wait_for`` compared it with
0: ``TypeError``, and the handler's coroutine was never awaited); 0 or a negative
number cancelled every call at once ("timed out after 0 s"); NaN armed an event-loop
timer at NaN, which the loop's timer heap cannot order.
"""

from __future__ import annotations

import pytest

from tests.engine.support import Env, make_turn, tool
from tests.engine.test_input import assert_untouched
from turnstate.core import InvalidInput


@pytest.mark.parametrize("seconds", ["5", None, True, 0, 0.0, -1, float("nan"), float("-inf")])
async def test_a_timeout_that_is_not_positive_seconds_is_refused(env: Env, seconds: object) -> None:
    tools = (tool("weather"), tool("time", timeout=seconds))  # type: ignore[arg-type]
    with pytest.raises(InvalidInput) as caught:
        await anext(env.engine.run_turn(env.chat_id, make_turn(tools=tools)))
    assert caught.value.field == "tools[1].timeout"
    await assert_untouched(env)


@pytest.mark.parametrize("seconds", [1, 0.25, float("inf")])
async def test_a_positive_timeout_is_taken(env: Env, seconds: float) -> None:
    outcome = await env.turn(tools=(tool("weather", timeout=seconds),))
    assert outcome.events[-1].type == "turn_completed"
