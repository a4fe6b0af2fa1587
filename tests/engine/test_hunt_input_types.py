"""A ``TurnInput`` whose fields have the wrong types is ``InvalidInput`` naming the field,
before the lease.

An embedder that passed ``system_prompt=None``, a number as ``user_text`` or
``turn_id``, tool names instead of ``Tool`` objects, a ``dict`` for ``settings`` or
``model=None`` got a bare ``AttributeError`` from deep inside the engine; a ``dict``
for ``context`` even took the lease and aborted the turn ``internal_error``.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.engine.support import Env, make_turn
from tests.engine.test_input import assert_untouched
from turnstate.core import InvalidInput


@pytest.mark.parametrize(("field", "changes"), [
    ("user_text", {"text": 123}),
    ("system_prompt", {"prompt": None}),
    ("model", {"model": None}),
    ("provider", {"provider": b"openai"}),
    ("turn_id", {"turn_id": 5}),
    ("owner", {"owner": 5}),
    ("tools", {"tools": ("weather",)}),
    ("settings", {"settings": {"max_output_tokens": 5}}),
    ("context", {"context": {"cache": "auto"}}),
    ("tool_iteration_limit", {"tool_iteration_limit": "3"}),
    ("tool_iteration_limit", {"tool_iteration_limit": True}),
    ("tool_iteration_limit", {"tool_iteration_limit": -1}),
])
async def test_a_field_of_the_wrong_type_is_refused_naming_it(
        env: Env, field: str, changes: dict[str, Any]) -> None:
    turn = make_turn(**changes)
    with pytest.raises(InvalidInput) as caught:
        await anext(env.engine.run_turn(env.chat_id, turn))
    assert caught.value.field == field
    await assert_untouched(env)
