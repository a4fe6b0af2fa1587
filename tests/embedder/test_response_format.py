"""``GenerationSettings.response_format`` (embed4): the answer as JSON on all five
providers. Before, a backend that needed structured output had no way to ask for it
(``GenerationSettings(response_format=...)`` was a ``TypeError``). Now each adapter
writes its wire's form, which the official SDKs' params accept; what a provider cannot
honour is ``InvalidInput`` before the lease, never dropped."""

from __future__ import annotations

import json
from typing import Any

import attrs
import pytest
from google.genai._gaos.types.interactions.textresponseformat import TextResponseFormat

from tests.providers.sdk_params import params_for, unknown_fields
from tests.providers.test_request_shapes import ADAPTERS, MODELS, Conversation, calls
from turnstate import (
    DEFAULT_REGISTRY,
    GenerationSettings,
    InvalidInput,
    ResponseFormat,
    TurnCompleted,
    TurnEngine,
    TurnInput,
)
from turnstate.core._generation import check_settings
from turnstate.emulators import EmulatedProviders
from turnstate.testing import emulated_engine, emulated_providers, turn_events

__all__ = ["emulated_engine", "emulated_providers"]  # the fixtures, imported for pytest

SCHEMA: dict[str, Any] = {"type": "object", "properties": {"city": {"type": "string"}},
                          "required": ["city"], "additionalProperties": False}
FORMATS = {"openai": ResponseFormat(schema=SCHEMA, name="city", strict=False),
           "gemini": ResponseFormat(schema=SCHEMA),
           "anthropic": ResponseFormat(schema=SCHEMA),
           "deepseek": ResponseFormat(),
           "openai-compatible": ResponseFormat(schema=SCHEMA, name="city")}
WIRE: dict[str, tuple[str, Any]] = {
    "openai": ("text", {"format": {"type": "json_schema", "name": "city", "schema": SCHEMA,
                                   "strict": False}}),
    "gemini": ("response_format", {"type": "text", "mime_type": "application/json",
                                   "schema": SCHEMA}),
    "anthropic": ("output_config", {"format": {"type": "json_schema", "schema": SCHEMA}}),
    "deepseek": ("response_format", {"type": "json_object"}),
    "openai-compatible": ("response_format", {"type": "json_schema", "json_schema": {
        "name": "city", "schema": SCHEMA, "strict": True}}),
}


@pytest.mark.parametrize("provider", list(ADAPTERS))
def test_each_wire_carries_the_format_and_the_sdk_knows_it(provider: str) -> None:
    settings = GenerationSettings(response_format=FORMATS[provider])
    model = DEFAULT_REGISTRY.model(provider, MODELS[provider])
    check_settings(settings, DEFAULT_REGISTRY.provider(provider), model, ("weather",))
    case = Conversation("format", loop=True, fields=lambda p, m: {"generation": settings})
    key, wire = WIRE[provider]
    for label, call in calls(provider, case):
        request = ADAPTERS[provider]().build_request(call)
        body = json.loads(request.body)
        assert body[key] == wire, label
        unknown = unknown_fields(provider, body, params_for(provider, request))
        assert unknown == (["response_format.schema"] if provider == "gemini" else []), label
    if provider == "gemini":  # the param TypedDict spells it schema_; the wire, schema
        parsed = TextResponseFormat.model_validate(body["response_format"])
        assert parsed.model_dump(by_alias=True, exclude_none=True) == body["response_format"]


def test_json_mode_on_the_openai_wires() -> None:
    settings = GenerationSettings(response_format=ResponseFormat())
    for provider, key in (("openai", "text"), ("openai-compatible", "response_format")):
        call = next(calls(provider, Conversation("json", fields=lambda p, m: {
            "generation": settings})))[1]
        body = json.loads(ADAPTERS[provider]().build_request(call).body)
        assert body[key] == ({"format": {"type": "json_object"}} if key == "text"
                             else {"type": "json_object"})


@pytest.mark.parametrize(("provider", "fmt", "field"), [
    ("deepseek", ResponseFormat(schema=SCHEMA), "settings.response_format.schema"),
    ("anthropic", ResponseFormat(), "settings.response_format"),
    ("openai", ResponseFormat(schema={"type": "array", "items": {"type": "string"}}),
     "settings.response_format.schema"),
])
def test_a_format_the_provider_cannot_honour_is_refused(provider: str, fmt: ResponseFormat,
                                                         field: str) -> None:
    model = DEFAULT_REGISTRY.model(provider, MODELS[provider])
    with pytest.raises(InvalidInput) as caught:
        check_settings(GenerationSettings(response_format=fmt),
                       DEFAULT_REGISTRY.provider(provider), model, ())
    assert caught.value.field == field


@pytest.mark.parametrize(("fields", "field"), [
    ({"schema": ["not", "a", "mapping"]}, "settings.response_format.schema"),
    ({"schema": {"type": "object", "default": float("nan")}},
     "settings.response_format.schema"),
    ({"schema": {"type": "object", "x": object()}}, "settings.response_format.schema"),
    ({"name": "has space"}, "settings.response_format.name"),
    ({"name": "n" * 65}, "settings.response_format.name"),
    ({"strict": "yes"}, "settings.response_format.strict"),
])
def test_a_bad_format_is_refused_when_built(fields: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        ResponseFormat(**fields)
    assert caught.value.field == field
    with pytest.raises(InvalidInput) as caught:
        GenerationSettings(response_format=fields)
    assert caught.value.field == field


def test_a_mapping_converts_and_as_json_round_trips() -> None:
    fmt = ResponseFormat(schema=SCHEMA, name="city", strict=False)
    settings = GenerationSettings(response_format=fmt.as_json())
    assert settings.response_format == fmt
    assert settings.as_json() == {"response_format": fmt.as_json()}
    assert settings.given() == ("response_format",)
    with pytest.raises(InvalidInput) as caught:
        GenerationSettings(response_format={"schema": SCHEMA, "type": "json_schema"})
    assert caught.value.field == "settings.response_format"
    with pytest.raises(InvalidInput):
        GenerationSettings(response_format="json")  # type: ignore[arg-type]


def test_the_schema_is_copied_when_built() -> None:
    schema: dict[str, Any] = {"type": "object", "properties": {}}
    fmt = ResponseFormat(schema=schema)
    schema["properties"]["late"] = {"type": "string"}
    assert fmt.schema_json() == {"type": "object", "properties": {}}


@pytest.mark.parametrize("provider", list(ADAPTERS))
async def test_a_turn_with_a_format_completes_on_every_emulator(
        emulated_engine: TurnEngine, provider: str) -> None:
    chat = await emulated_engine.store.create_chat(owner="o")
    settings = GenerationSettings(response_format=FORMATS[provider])
    events = await turn_events(emulated_engine.run_turn(chat.id, TurnInput(
        provider=provider, model=MODELS[provider], system_prompt="Answer in JSON.",
        user_text="[[settings]]", settings=settings)))
    final = events[-1]
    assert isinstance(final, TurnCompleted), final
    echoed = json.loads(final.text.removeprefix("Settings: "))
    expected = FORMATS[provider]
    if provider in ("gemini", "anthropic", "deepseek"):  # no name or strict on their wires
        expected = attrs.evolve(expected, name="response", strict=True)
    assert echoed["response_format"] == expected.as_json()


async def test_a_refused_format_takes_no_lease(emulated_engine: TurnEngine,
                                              emulated_providers: EmulatedProviders) -> None:
    chat = await emulated_engine.store.create_chat(owner="o")
    turn = TurnInput(provider="deepseek", model="deepseek-chat", system_prompt="s",
                     user_text="hi")
    with pytest.raises(InvalidInput) as caught:
        await turn_events(emulated_engine.run_turn(chat.id, attrs.evolve(
            turn, settings=GenerationSettings(response_format=ResponseFormat(schema=SCHEMA)))))
    assert caught.value.field == "settings.response_format.schema"
    assert emulated_providers.emulators["deepseek"].requests == []
    events = await turn_events(emulated_engine.run_turn(chat.id, turn))
    assert isinstance(events[-1], TurnCompleted)
