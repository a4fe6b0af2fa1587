"""A tool call whose arguments hold ``NaN``, ``Infinity``, ``-Infinity`` or a number past
a float's range gets the error result of arguments that are not JSON; the handler never
runs with a float that is not finite.

``json.loads`` takes those constants (and reads ``1e999`` as infinity), so the handler
got ``float("nan")`` or ``inf``, against the rule that invalid arguments become a tool
error the model sees. The arguments themselves are stored and sent back as they came.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.engine.support import Env, tool
from turnstate.emulators._scripted import ScriptStep

MODELS = {"openai": "gpt-4o", "gemini": "gemini-2.5-flash", "anthropic": "claude-sonnet-4-5",
          "openai-compatible": "gpt-4o-mini", "deepseek": "deepseek-chat"}
PARAMETERS = {"type": "object", "properties": {"x": {"type": "number"}}, "required": ["x"]}
REFUSED = ['{"x": NaN}', '{"x": Infinity}', '{"x": -Infinity}', '{"x": 1e999}',
           '{"x": -1E400}', '{"x": 1, "more": [{"y": NaN}]}']


@pytest.mark.parametrize("provider", sorted(MODELS))
async def test_non_finite_numbers_in_arguments_are_a_tool_error(env: Env, provider: str
                                                                 ) -> None:
    seen: list[dict[str, Any]] = []

    async def measure(args: dict[str, Any]) -> Any:
        seen.append(args)
        return {"ok": True}

    calls = [("measure", arguments) for arguments in [*REFUSED, '{"x": 1.5e300}']]
    env.backend.push(provider, ScriptStep.call(*calls), ScriptStep.reply("done"))
    outcome = await env.turn("go", provider=provider, model=MODELS[provider],
                             tools=(tool("measure", measure, parameters=PARAMETERS),))
    assert outcome.final.type == "turn_completed", outcome.final
    assert seen == [{"x": 1.5e300}]  # only the finite call ran
    results = outcome.of_type("tool_result")
    assert [r.is_error for r in results] == [True] * len(REFUSED) + [False]
    errors = [json.loads(r.output)["error"] for r in results[:-1]]
    assert all(e.startswith("arguments are not valid JSON (") for e in errors), errors
    assert "NaN is not a JSON number" in errors[0]
    assert "-Infinity is not a JSON number" in errors[2]
    assert "1e999 is too large" in errors[3]
    stored = [c.arguments for c in outcome.of_type("tool_call")]
    assert stored[:len(REFUSED)] == REFUSED  # the raw arguments are kept as they came
