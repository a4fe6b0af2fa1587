"""Gemini function declarations carry no ``$ref``/``$defs``: pydantic's nested models are
inlined, a recursive schema is refused typed (wire4)."""

from __future__ import annotations

import json
from typing import Any

import pydantic
import pytest

from tests.providers.support import cursor_defaults, provider_call, request_json
from turnstate.core._conversation import ToolSpec
from turnstate.core._errors import InvalidInput
from turnstate.core._registry import DEFAULT_REGISTRY
from turnstate.providers._schema_refs import MAX_INLINED_NODES, inline_refs
from turnstate.providers.gemini_interactions import GeminiInteractionsAdapter

MODEL = DEFAULT_REGISTRY.model("gemini", "gemini-2.5-flash")


class City(pydantic.BaseModel):
    name: str


class Trip(pydantic.BaseModel):
    city: City = pydantic.Field(description="Where to.")
    stops: list[City] = []


class Node(pydantic.BaseModel):
    children: list[Node] = []


def sent_parameters(schema: dict[str, Any]) -> Any:
    tools = (ToolSpec(name="plan", parameters=schema),)
    body = request_json(GeminiInteractionsAdapter(api_key="k"),
                        provider_call(cursor_defaults(MODEL, tools)))
    return body["tools"][0]["parameters"]


def test_a_pydantic_schema_goes_to_gemini_with_its_refs_inlined() -> None:
    sent = sent_parameters(Trip.model_json_schema())
    text = json.dumps(sent)
    assert "$ref" not in text and "$defs" not in text
    city = {"properties": {"name": {"title": "Name", "type": "string"}},
            "required": ["name"], "title": "City", "type": "object"}
    assert sent["properties"]["city"] == {**city, "description": "Where to."}
    assert sent["properties"]["stops"]["items"] == city
    assert sent["required"] == ["city"]


def test_a_recursive_schema_is_refused_typed_naming_the_tool() -> None:
    with pytest.raises(InvalidInput) as raised:
        sent_parameters(Node.model_json_schema())
    assert raised.value.field == "tools[plan].parameters"
    assert "recursive" in raised.value.problem


def test_a_schema_without_refs_is_sent_as_it_is_and_bad_refs_are_typed() -> None:
    plain = {"type": "object", "properties": {"a": {"type": "string"}}}
    assert inline_refs(plain, "f") is plain
    assert inline_refs({**plain, "$defs": {}}, "f") == plain
    for ref in ("#/$defs/Missing", "https://example.com/s.json"):
        with pytest.raises(InvalidInput):
            inline_refs({"type": "object", "properties": {"a": {"$ref": ref}}}, "f")


def test_an_exponential_chain_of_definitions_is_bounded() -> None:
    defs = {f"D{i}": {"type": "object", "properties": {
        "l": {"$ref": f"#/$defs/D{i + 1}"}, "r": {"$ref": f"#/$defs/D{i + 1}"}}}
        for i in range(20)}
    defs["D20"] = {"type": "string"}
    with pytest.raises(InvalidInput, match=str(MAX_INLINED_NODES)):
        inline_refs({"$ref": "#/$defs/D0", "$defs": defs}, "f")
