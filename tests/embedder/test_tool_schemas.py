"""Tool schemas as pydantic writes them (``Model.model_json_schema()``): nested models
and enums are ``$ref``s into ``$defs`` (embedder3).

Before, the argument check ignored ``$ref``: a call missing a nested model's required
field, or naming a value outside an enum defined in ``$defs``, reached the handler as
valid, against docs/api.md ("arguments that ... do not match the schema (the handler is
not called)"). The schemas below are pydantic 2.13's output, written out so the test
needs no pydantic.
"""

from __future__ import annotations

import json
from typing import Any

from turnstate import Tool, ToolResultEvent, ToolSpec, TurnEngine, TurnInput
from turnstate.core._schema import schema_problems
from turnstate.testing import emulated_engine, emulated_providers, turn_events

__all__ = ["emulated_engine", "emulated_providers"]  # the fixtures, imported for pytest

# class Address(BaseModel): city: str; zip: str | None = None
# class Unit(str, Enum): C = "c"; F = "f"
# class Forecast(BaseModel):
#     address: Address; unit: Unit = Unit.C; days: int = Field(1, ge=1, le=10)
FORECAST = {
    "$defs": {
        "Address": {"properties": {"city": {"title": "City", "type": "string"},
                                   "zip": {"anyOf": [{"type": "string"}, {"type": "null"}],
                                           "default": None, "title": "Zip"}},
                    "required": ["city"], "title": "Address", "type": "object"},
        "Unit": {"enum": ["c", "f"], "title": "Unit", "type": "string"}},
    "properties": {"address": {"$ref": "#/$defs/Address"},
                   "unit": {"$ref": "#/$defs/Unit", "default": "c"},
                   "days": {"default": 1, "maximum": 10, "minimum": 1, "title": "Days",
                            "type": "integer"}},
    "required": ["address"], "title": "Forecast", "type": "object"}

# class Node(BaseModel): name: str; children: list["Node"] = []
NODE = {"$defs": {"Node": {"properties": {
            "name": {"title": "Name", "type": "string"},
            "children": {"default": [], "items": {"$ref": "#/$defs/Node"},
                         "title": "Children", "type": "array"}},
        "required": ["name"], "title": "Node", "type": "object"}},
    "properties": {"root": {"$ref": "#/$defs/Node"}}, "required": ["root"],
    "title": "Tree", "type": "object"}


async def test_a_call_breaking_a_referenced_model_is_an_error_result(
        emulated_engine: TurnEngine) -> None:
    called: list[dict[str, Any]] = []

    async def forecast(arguments: dict[str, Any]) -> str:
        called.append(arguments)
        return "sunny"

    tool = Tool(spec=ToolSpec(name="forecast", description="The weather.",
                              parameters=FORECAST), handler=forecast)
    chat = await emulated_engine.store.create_chat(owner="alice")
    results = []
    for arguments in ({"address": {}}, {"address": {"city": "Oslo"}, "unit": "k"},
                      {"address": {"city": "Oslo", "zip": None}, "unit": "f"}):
        turn = TurnInput(provider="anthropic", model="claude-sonnet-4-6",
                         system_prompt="Be brief.", tools=(tool,),
                         user_text=f"[[call:forecast {json.dumps(arguments)}]] weather?")
        events = await turn_events(emulated_engine.run_turn(chat.id, turn))
        assert events[-1].type == "turn_completed"
        results += [event for event in events if isinstance(event, ToolResultEvent)]
    assert [(result.is_error, json.loads(result.output)) for result in results[:2]] == [
        (True, {"error": "arguments do not match the schema: /address: "
                         "missing required property 'city'"}),
        (True, {"error": "arguments do not match the schema: /unit: must be "
                         "one of ['c', 'f']"})]
    assert called == [{"address": {"city": "Oslo", "zip": None}, "unit": "f"}]
    assert not results[2].is_error


def test_recursive_and_cyclic_references_end() -> None:
    tree = {"root": {"name": "a", "children": [{"name": "b", "children": [{"children": []}]}]}}
    assert schema_problems(tree, NODE) == [
        "/root/children/0/children/0: missing required property 'name'"]
    assert schema_problems({"root": {"name": "a"}}, NODE) == []
    assert schema_problems({"x": 1}, {"$ref": "#", "type": "object"}) == []  # a cycle
    assert schema_problems(3, {"anyOf": [{"$ref": "#"}], "type": "string"}) == [
        "arguments: expected string, got int"]
    # a reference that names nothing here (or elsewhere: nothing is fetched) is ignored
    assert schema_problems({"a": 1}, {"properties": {"a": {"$ref": "#/$defs/Gone"}}}) == []
    assert schema_problems({"a": 1}, {"properties": {
        "a": {"$ref": "https://example.com/s.json"}}}) == []
    assert schema_problems({"a/b": 2}, {"properties": {"a/b": {"$ref": "#/$defs/x~1y"}},
                                        "$defs": {"x/y": {"type": "string"}}}) == [
        "/a/b: expected string, got int"]
