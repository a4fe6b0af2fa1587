"""A tool's return value that cannot be made text is the model's tool error, not the
turn's end (hunt-life).

``render_output`` ran outside ``run_tool``'s ``try``: an integer past Python's 4,300
digit limit for ``str``, a value nested past the recursion limit, or an object whose
``__str__`` raises escaped the task group, and the turn aborted ``internal_error``
with every other call's result lost.
"""

from __future__ import annotations

import functools
from typing import Any

import pytest

from tests.engine.support import Env, tool
from turnstate.emulators._scripted import ScriptStep


class _Unprintable:
    def __str__(self) -> str:
        msg = "no text for this"
        raise RuntimeError(msg)


def _nested(depth: int) -> list[Any]:
    return functools.reduce(lambda inner, _: [inner], range(depth), [])


@pytest.mark.parametrize("value", [10**5000, {"n": 10**5000}, _Unprintable(), _nested(5000)],
                         ids=["huge-int", "huge-int-inside", "str-raises", "too-deep"])
async def test_a_value_with_no_text_is_an_error_result_and_the_turn_commits(
        env: Env, value: object) -> None:
    async def returns(_: dict[str, Any]) -> Any:
        return value

    env.backend.push("anthropic", ScriptStep.call(("odd", {"city": "a"}), ("fine", {"city": "b"})),
                     ScriptStep.reply("done"))
    outcome = await env.turn("x", provider="anthropic", model="claude-sonnet-4-5",
                             tools=(tool("odd", returns), tool("fine")))
    assert outcome.committed, outcome.final
    results = {e.name: e for e in outcome.of_type("tool_result")}
    assert results["odd"].is_error
    assert "returned a value that cannot be shown as text" in results["odd"].output
    assert not results["fine"].is_error
