"""Review of the bughunt's input checks (issue 26): a context setting of the wrong type
is refused before the lease, as the turn's own fields and its generation settings are.

``ContextSettings(compact_threshold="x")`` passed ``check_input``, took the lease, and
the turn aborted ``provider_failed`` mid-turn ("could not build the request: TypeError",
Anthropic's adapter compares the threshold with its minimum) or sent the provider a
threshold it refuses (OpenAI sends it as given).
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.engine.support import Env, make_turn
from tests.engine.test_input import assert_untouched
from turnstate.core import InvalidInput
from turnstate.core._context import ContextSettings


@pytest.mark.parametrize("threshold", ["x", 1.5, True, 0, -100])
async def test_a_compaction_threshold_that_is_not_a_count_is_refused_naming_it(
        env: Env, threshold: Any) -> None:
    turn = make_turn(context=ContextSettings(compact_threshold=threshold))
    with pytest.raises(InvalidInput) as caught:
        await anext(env.engine.run_turn(env.chat_id, turn))
    assert caught.value.field == "context.compact_threshold"
    await assert_untouched(env)


async def test_a_compaction_threshold_of_whole_tokens_is_taken(env: Env) -> None:
    turn = make_turn(context=ContextSettings(compact_threshold=60_000))
    events = [event async for event in env.engine.run_turn(env.chat_id, turn)]
    assert events[-1].type == "turn_completed"
