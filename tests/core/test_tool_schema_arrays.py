"""A tool whose schema has an array without ``items`` is refused when it is built.

OpenAI (Responses and Chat Completions: "Invalid schema for function ...: In
context=('properties', 'tags'), array schema missing items") and Gemini ("...
parameters.properties[tags].items: missing field") answer such a tool with a 400, which
came after the turn had taken its chat and written its question. ``ToolSpec`` now refuses
it with ``InvalidInput`` naming the tool and where in its schema the array is, at any
depth (properties, items, anyOf, $defs, a type list holding "array").
"""

from __future__ import annotations

from typing import Any

import pytest

from turnstate.core._conversation import ToolSpec
from turnstate.core._errors import InvalidInput

TAGS: dict[str, Any] = {"type": "array"}


@pytest.mark.parametrize(("parameters", "where"), [
    ({"type": "object", "properties": {"tags": TAGS}}, "parameters.properties.tags"),
    ({"properties": {"tags": {"type": ["array", "null"], "description": "t"}}},
     "parameters.properties.tags"),
    ({"type": "object", "properties": {"rows": {"type": "array", "items": TAGS}}},
     "parameters.properties.rows.items"),
    ({"type": "object", "properties": {"x": {"anyOf": [{"type": "string"}, TAGS]}}},
     "parameters.properties.x.anyOf[1]"),
    ({"type": "object", "$defs": {"list": TAGS}, "properties": {"x": {"$ref": "#/$defs/list"}}},
     "parameters.$defs.list"),
    ({"type": "object", "properties": {"o": {"type": "object", "additionalProperties": TAGS}}},
     "parameters.properties.o.additionalProperties"),
    ({"type": "object", "properties": {"p": {"type": "array", "prefixItems": [TAGS]}}},
     "parameters.properties.p"),
])
def test_an_array_without_items_is_refused_naming_the_tool_and_the_path(
        parameters: dict[str, Any], where: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        ToolSpec(name="tagger", description="tags things", parameters=parameters)
    assert caught.value.field == "tools[tagger].parameters"
    assert f'{where}: an array schema needs "items"' in str(caught.value)


@pytest.mark.parametrize("items", [{}, True, {"type": "string"},
                                   {"type": "array", "items": {"type": "integer"}}])
def test_an_array_with_items_is_taken(items: Any) -> None:
    spec = ToolSpec(name="tagger", parameters={
        "type": "object", "properties": {"tags": {"type": ["array", "null"], "items": items},
                                         "blob": {"description": "no type: anything"}}})
    assert spec.parameters["properties"]["tags"]["items"] == items
