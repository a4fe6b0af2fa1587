"""Structured output on the emulators (emul7): with a JSON format asked in each provider's
own shape, the answer is JSON valid against the schema (a minimal instance), so an
embedder can test its JSON parsing against them; a ``[[say:...]]`` that is JSON is kept,
``[[settings]]`` still echoes the settings, and a plain ``text`` format is plain text."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest

from tests.engine.support import make_turn
from turnstate import GenerationSettings, ResponseFormat, TurnCompleted, TurnEngine
from turnstate.emulators import ScriptedModel
from turnstate.emulators._conversation_model import Item
from turnstate.emulators._settings import wire_settings
from turnstate.emulators._structured import minimal_instance
from turnstate.testing import emulated_engine, emulated_providers, turn_events

__all__ = ["emulated_engine", "emulated_providers"]  # the fixtures, imported for pytest

SCHEMA: dict[str, Any] = {
    "type": "object", "additionalProperties": False,
    "properties": {"city": {"type": "string", "minLength": 2},
                   "days": {"type": "integer", "minimum": 1},
                   "unit": {"enum": ["C", "F"]},
                   "tags": {"type": "array", "items": {"type": "string"}, "minItems": 1},
                   "where": {"$ref": "#/$defs/place"},
                   "note": {"type": ["string", "null"]}},
    "required": ["city", "days", "unit", "tags", "where"],
    "$defs": {"place": {"type": "object", "properties": {"lat": {"type": "number"},
                                                         "ok": {"type": "boolean"}},
                        "required": ["lat", "ok"]}},
}
MODELS = {"openai": "gpt-4o", "gemini": "gemini-3-pro-preview",
          "anthropic": "claude-sonnet-4-5", "openai-compatible": "grok-3-mini",
          "deepseek": "deepseek-chat"}


def test_a_minimal_instance_is_valid_against_its_schema() -> None:
    instance = minimal_instance(SCHEMA)
    jsonschema.validate(instance, SCHEMA)
    assert instance == {"city": "xx", "days": 1, "unit": "C", "tags": [""],
                        "where": {"lat": 0, "ok": False}}
    assert minimal_instance(None) == {}
    recursive = {"type": "object", "properties": {"next": {"$ref": "#"}}, "required": ["next"]}
    assert isinstance(minimal_instance(recursive), dict)  # bounded, not a RecursionError
    merged = {"allOf": [{"properties": {"a": {"type": "integer"}}, "required": ["a"]},
                        {"properties": {"b": {"const": "k"}}, "required": ["b"]}]}
    assert minimal_instance(merged) == {"a": 0, "b": "k"}
    assert minimal_instance({"anyOf": [{"type": "null"}, {"type": "string"}]}) is None


@pytest.mark.parametrize("provider", sorted(MODELS))
@pytest.mark.parametrize("text", ["where should I go?", "[[call:weather]] and then?"])
async def test_every_emulator_answers_json_valid_against_the_schema(
        emulated_engine: TurnEngine, provider: str, text: str) -> None:
    chat = await emulated_engine.store.create_chat(owner="o")
    fmt = ResponseFormat() if provider == "deepseek" else ResponseFormat(schema=SCHEMA)
    events = await turn_events(emulated_engine.run_turn(chat.id, make_turn(
        text, provider=provider, model=MODELS[provider], prompt="Answer in JSON.",
        settings=GenerationSettings(response_format=fmt))))
    final = events[-1]
    assert isinstance(final, TurnCompleted), final
    answer = json.loads(final.text)  # JSON mode (DeepSeek takes no schema): an object
    jsonschema.validate(answer, SCHEMA if fmt.schema is not None else {"type": "object"})


def test_a_scripted_json_answer_is_kept_and_plain_text_stays_text() -> None:
    model = ScriptedModel()
    said = Item(kind="user", text='[[say:{"city":"Oslo"}]]')
    asked = wire_settings({"text": {"format": {"type": "json_schema", "name": "n",
                                               "schema": SCHEMA}}})
    assert model.respond([said], {}, asked).text == '{"city":"Oslo"}'
    assert json.loads(model.respond([Item(kind="user", text="[[say:Oslo]]")], {},
                                    asked).text) == minimal_instance(SCHEMA)
    for plain in ({"text": {"format": {"type": "text"}}}, {"response_format": {"type": "text"}},
                  {"response_format": {"type": "text", "mime_type": "text/plain"}}):
        assert model.respond([Item(kind="user", text="hi")], {},
                             wire_settings(plain)).text == "You said: hi", plain
    gemini = wire_settings({"response_format": {"type": "text",
                                                "mime_type": "application/json"}})
    assert json.loads(model.respond([Item(kind="user", text="hi")], {}, gemini).text) == {}
