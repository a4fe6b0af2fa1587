"""A turn id is bounded and typed: ``""`` is no longer replaced silently by a generated
id, and a 100 KB id is refused before the lease (wire4)."""

from __future__ import annotations

import pytest

from tests.engine.support import Env, make_turn
from tests.engine.test_input import assert_untouched
from turnstate.core import InvalidInput
from turnstate.engine._limits import MAX_TURN_ID


@pytest.mark.parametrize("turn_id", ["", "x" * 100_000, "x" * (MAX_TURN_ID + 1), "a b",
                                     "t\r\nX-Evil: 1", "tür"])
async def test_a_bad_turn_id_is_refused_before_the_lease(env: Env, turn_id: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        await anext(env.engine.run_turn(env.chat_id, make_turn(turn_id=turn_id)))
    assert caught.value.field == "turn_id"
    assert "xxxx" not in str(caught.value)  # the id is not echoed
    await assert_untouched(env)


@pytest.mark.parametrize("turn_id", ["x" * MAX_TURN_ID, "01J9Z:abc.def_g",
                                     "3f2b1c9e-8d4a-4c4e-9f1a-2b3c4d5e6f70"])
async def test_usual_ids_are_taken(env: Env, turn_id: str) -> None:
    events = [event async for event in env.engine.run_turn(env.chat_id,
                                                           make_turn(turn_id=turn_id))]
    assert events[-1].turn_id == turn_id
