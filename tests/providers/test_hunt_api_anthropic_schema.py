"""A tool whose parameters leave out ``"type": "object"`` reaches Anthropic with it
(hunt-api).

``ToolSpec`` takes parameters whose ``type``, if given, is ``object`` (``{}`` or
``{"properties": ...}``), and OpenAI, Gemini and Chat Completions take such a schema; the
Anthropic codec sent it as ``input_schema`` unchanged, but Anthropic requires
``input_schema.type`` (its SDK types it ``Required[Literal["object"]]``), so every turn
with that tool was refused with an HTTP 400 after its begin.
"""

from __future__ import annotations

from typing import Any

import pytest

from turnstate import ToolSpec
from turnstate.providers.anthropic._blocks import render_tools


@pytest.mark.parametrize("parameters", [
    {},
    {"properties": {"city": {"type": "string"}}, "required": ["city"]},
])
def test_input_schema_always_says_object(parameters: dict[str, Any]) -> None:
    (tool,) = render_tools([ToolSpec(name="weather", parameters=parameters)])
    assert tool["input_schema"] == {"type": "object", **parameters}


def test_a_schema_that_says_object_is_sent_as_it_is() -> None:
    parameters = {"type": "object", "properties": {"n": {"type": "integer"}}}
    (tool,) = render_tools([ToolSpec(name="count", parameters=parameters)])
    assert tool["input_schema"] == parameters
