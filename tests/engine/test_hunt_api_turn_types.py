"""More of ``TurnInput`` an embedder can get wrong: each is ``InvalidInput`` naming the
field, when the input is built or before the lease (hunt-api).

``TurnInput(tools=None)`` (or one ``Tool`` not in a sequence, or ``content=None``)
raised ``tuple``'s bare ``TypeError``; a ``Tool`` whose ``spec`` is a dict raised
``AttributeError`` from inside the engine, and one whose handler is None ran the turn
and failed only when the model called it; ``recover_tool_results="no"`` and
``ContextSettings(provider_compaction_enabled="no")`` were taken as True;
``ContextSettings(cache="forever")`` raised enum's bare ``ValueError``.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.engine.support import Env, make_turn, tool
from tests.engine.test_input import assert_untouched
from turnstate.core import ContextSettings, InvalidInput, TextPart, Tool, ToolSpec
from turnstate.engine import TurnInput


async def _handler(args: dict[str, Any]) -> Any:
    return args


@pytest.mark.parametrize(("field", "changes"), [
    ("tools", {"tools": None}),
    ("tools", {"tools": Tool(spec=ToolSpec(name="a"), handler=_handler)}),
    ("content", {"content": None}),
    ("content", {"content": TextPart(text="hi")}),
])
def test_a_field_that_is_not_a_sequence_is_refused_when_built(field: str,
                                                              changes: dict[str, Any]) -> None:
    fields: dict[str, Any] = {"provider": "openai", "model": "gpt-4o", "system_prompt": "",
                              **({} if "content" in changes else {"user_text": "hi"}), **changes}
    with pytest.raises(InvalidInput) as caught:
        TurnInput(**fields)
    assert caught.value.field == field and "must be a sequence" in caught.value.problem


@pytest.mark.parametrize(("field", "changes"), [
    ("tools[1].spec", {"tools": (tool("weather"),
                                 Tool(spec={"name": "time"}, handler=_handler))}),  # type: ignore[arg-type]
    ("tools[0].handler", {"tools": (Tool(spec=ToolSpec(name="a"), handler=None),)}),  # type: ignore[arg-type]
    ("recover_tool_results", {"recover_tool_results": "no"}),
    ("recover_tool_results", {"recover_tool_results": 0}),
    ("context.provider_compaction_enabled",
     {"context": ContextSettings(provider_compaction_enabled="no")}),  # type: ignore[arg-type]
])
async def test_a_tool_or_flag_of_the_wrong_type_is_refused_before_the_lease(
        env: Env, field: str, changes: dict[str, Any]) -> None:
    turn = make_turn(**changes)
    with pytest.raises(InvalidInput) as caught:
        await anext(env.engine.run_turn(env.chat_id, turn))
    assert caught.value.field == field
    await assert_untouched(env)


@pytest.mark.parametrize(("field", "changes"), [
    ("context.cache", {"cache": "forever"}),
    ("context.overflow", {"overflow": "explode"}),
])
def test_an_unknown_context_policy_is_refused_naming_it(field: str,
                                                        changes: dict[str, Any]) -> None:
    with pytest.raises(InvalidInput) as caught:
        ContextSettings(**changes)
    assert caught.value.field == field and "is not one of" in caught.value.problem


@pytest.mark.parametrize("model", ["", "   ", " gpt-4o", "gpt-4o\n"])
async def test_a_blank_or_padded_model_name_is_refused_before_the_lease(env: Env,
                                                                        model: str) -> None:
    """The lenient registry took it as an unknown model and the request went out (a
    real provider answers 400 or 404 for it, after the turn's begin)."""
    with pytest.raises(InvalidInput) as caught:
        await anext(env.engine.run_turn(env.chat_id, make_turn(model=model)))
    assert caught.value.field == "model"
    await assert_untouched(env)
