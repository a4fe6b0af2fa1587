"""Per-turn GenerationSettings: each of the five adapters carries every setting it takes
onto the wire and the emulator echoes it back; a refused setting costs no lease; the
settings are not part of the envelope (changing them keeps the cursor)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.engine.support import collect, make_turn
from turnstate.core import InvalidInput
from turnstate.core._events import TurnCompleted
from turnstate.core._generation import GenerationSettings
from turnstate.core._registry import DEFAULT_REGISTRY, ModelInfo
from turnstate.core._response_format import ResponseFormat
from turnstate.emulators import EmulatedProviders
from turnstate.emulators._settings import wire_settings
from turnstate.engine import TurnEngine
from turnstate.providers._protocol import ThinksByDefault, thinks_by_default
from turnstate.providers._transport import AiohttpTransport
from turnstate.storage import MemoryStore

SCHEMA = {"type": "object", "properties": {"answer": {"type": "string"}},
          "required": ["answer"], "additionalProperties": False}

# Every setting each provider takes, on a model that takes it; with the two tools of
# make_turn, so tool_choice and parallel_tool_calls go on the wire.
# OpenAI's reasoning models take no sampling settings, so it needs a second model.
FULL: dict[str, tuple[str, GenerationSettings]] = {
    "openai": ("gpt-5", GenerationSettings(
        max_output_tokens=900, reasoning_effort="minimal", tool_choice="weather",
        parallel_tool_calls=False, metadata={"team": "blue"},
        response_format=ResponseFormat(schema=SCHEMA, name="answer", strict=False))),
    "openai/sampling": ("gpt-4o", GenerationSettings(temperature=1.25, top_p=0.5)),
    "gemini": ("gemini-3-pro-preview", GenerationSettings(
        max_output_tokens=800, temperature=0.25, top_p=0.5, reasoning_effort="low",
        tool_choice="required", stop=("STOP",), seed=42,
        response_format=ResponseFormat(schema=SCHEMA))),
    "openai-compatible": ("grok-3-mini", GenerationSettings(
        max_output_tokens=700, temperature=0.5, top_p=0.75, reasoning_effort="high",
        tool_choice="none", stop=("a", "b"), parallel_tool_calls=True, seed=7,
        response_format=ResponseFormat(schema=SCHEMA, name="answer"))),
    # DeepSeek's thinking mode ignores sampling settings: refused there, sent without it.
    "deepseek": ("deepseek-reasoner", GenerationSettings(
        max_output_tokens=600, reasoning_effort="low", tool_choice="time", stop=("END",),
        response_format=ResponseFormat())),  # JSON mode: DeepSeek takes no schema
    "deepseek/sampling": ("deepseek-chat", GenerationSettings(temperature=0.75, top_p=0.25)),
    # With extended thinking, Anthropic takes temperature 1 only and top_p from 0.95.
    "anthropic": ("claude-sonnet-4-5", GenerationSettings(
        max_output_tokens=5_000, top_p=0.95, reasoning_budget_tokens=2_048,
        tool_choice="auto", stop=("Human:",), parallel_tool_calls=False,
        response_format=ResponseFormat(schema=SCHEMA))),
    "anthropic/sampling": ("claude-sonnet-4-5", GenerationSettings(
        max_output_tokens=1_000, temperature=0.5, tool_choice="weather",
        metadata={"user_id": "u-1"})),  # Anthropic's metadata: user_id alone
}


@pytest.fixture
async def live() -> AsyncIterator[tuple[EmulatedProviders, TurnEngine, MemoryStore]]:
    async with EmulatedProviders() as stack, AiohttpTransport() as transport:
        store = MemoryStore()
        yield stack, TurnEngine(store, stack.adapters, transport), store


@pytest.mark.parametrize("provider", sorted(FULL))
async def test_every_setting_a_provider_takes_reaches_the_wire_and_is_echoed(
    live: tuple[EmulatedProviders, TurnEngine, MemoryStore], provider: str,
) -> None:
    stack, engine, store = live
    model, settings = FULL[provider]
    provider = provider.partition("/")[0]
    covered = {f for key, (_, s) in FULL.items() if key.partition("/")[0] == provider
               for f in s.given()}
    assert covered == DEFAULT_REGISTRY.provider(provider).settings
    chat = await store.create_chat(owner="o")
    outcome = await collect(engine.run_turn(chat.id, make_turn(  # JSON mode needs "json"
        "[[settings]]", provider=provider, model=model, settings=settings,
        prompt="You are terse. Answer in JSON.")))
    final = outcome.final
    assert isinstance(final, TurnCompleted), final
    # A forced tool_choice is obeyed (wire7): the first request calls the tool, and the
    # request after its result, which leaves the choice to the model, echoes the rest.
    forced = settings.tool_choice not in (None, "auto", "none")
    sent = [json.loads(r.body) for r in
            stack.emulators[provider].requests[-(2 if forced else 1):]]
    assert wire_settings(sent[0]) == settings.as_json()
    echoed = json.loads(final.text.removeprefix("Settings: "))
    assert echoed == {k: v for k, v in settings.as_json().items()
                      if not (forced and k == "tool_choice")}
    assert "Settings" not in json.dumps(sent[-1])  # the echo came from the wire, not the text


async def test_a_field_left_none_keeps_the_adapter_default(
    live: tuple[EmulatedProviders, TurnEngine, MemoryStore],
) -> None:
    stack, engine, store = live
    chat = await store.create_chat(owner="o")
    await collect(engine.run_turn(chat.id, make_turn(
        "hi", provider="anthropic", model="claude-sonnet-4-5",
        settings=GenerationSettings(temperature=0.5))))
    body: dict[str, Any] = json.loads(stack.emulators["anthropic"].requests[-1].body)
    assert body["max_tokens"] == 4096 and body["temperature"] == 0.5
    assert "thinking" not in body and "tool_choice" not in body
    await collect(engine.run_turn(chat.id, make_turn("hi", provider="openai")))
    body = json.loads(stack.emulators["openai"].requests[-1].body)
    assert not {"max_output_tokens", "temperature", "reasoning", "tool_choice"} & set(body)


async def test_a_refused_setting_names_its_field_before_the_lease(
    live: tuple[EmulatedProviders, TurnEngine, MemoryStore],
) -> None:
    stack, engine, store = live
    chat = await store.create_chat(owner="o")
    with pytest.raises(InvalidInput) as caught:
        await collect(engine.run_turn(chat.id, make_turn(
            "hi", provider="openai", model="o3", settings=GenerationSettings(temperature=1))))
    assert caught.value.field == "settings.temperature"
    with pytest.raises(InvalidInput) as caught:
        await collect(engine.run_turn(chat.id, make_turn(
            "hi", provider="anthropic", model="claude-sonnet-4-5",
            settings=GenerationSettings(max_output_tokens=2_000,
                                        reasoning_budget_tokens=3_000))))
    assert caught.value.field == "settings.reasoning_budget_tokens"
    for thinking_breaks in (GenerationSettings(reasoning_budget_tokens=2_048, temperature=0.2),
                            GenerationSettings(reasoning_budget_tokens=2_048,
                                               tool_choice="required")):
        with pytest.raises(InvalidInput) as caught:
            await collect(engine.run_turn(chat.id, make_turn(
                "hi", provider="anthropic", model="claude-sonnet-4-5",
                settings=thinking_breaks)))
        assert caught.value.field in {"settings.temperature", "settings.tool_choice"}
    assert (await store.load_chat(chat.id)).active_turn_id is None
    assert await store.load_history(chat.id) == ()
    assert all(not e.requests for e in stack.emulators.values())


async def test_an_adapter_that_thinks_by_default_refuses_a_sampling_turn_before_the_lease(
) -> None:
    """``AnthropicAdapter(thinking_budget_tokens=...)`` turns thinking on for turns that
    name no budget: a custom temperature then is refused before the lease, as the API
    would refuse it; lowering the output limit under the budget runs without thinking,
    so the same temperature passes."""
    options = {"anthropic": {"thinking_budget_tokens": 2_048}}
    async with EmulatedProviders(["anthropic"], options) as stack, \
            AiohttpTransport() as transport:
        store = MemoryStore()
        engine = TurnEngine(store, stack.adapters, transport)
        chat = await store.create_chat(owner="o")
        with pytest.raises(InvalidInput) as caught:
            await collect(engine.run_turn(chat.id, make_turn(
                "hi", provider="anthropic", model="claude-sonnet-4-5",
                settings=GenerationSettings(temperature=0.2))))
        assert caught.value.field == "settings.temperature"
        assert (await store.load_chat(chat.id)).active_turn_id is None
        assert not stack.emulators["anthropic"].requests
        await collect(engine.run_turn(chat.id, make_turn(
            "hi", provider="anthropic", model="claude-sonnet-4-5",
            settings=GenerationSettings(temperature=0.2, max_output_tokens=1_000))))
        body = json.loads(stack.emulators["anthropic"].requests[-1].body)
        assert body["temperature"] == 0.2 and "thinking" not in body


class _Plain:
    pass


class _Thinks:
    def __init__(self, answer: bool) -> None:
        self.answer = answer

    def thinks_by_default(self, settings: GenerationSettings, model: ModelInfo) -> bool:
        return self.answer


class _Unset:
    thinks_by_default = None


def test_the_thinking_lookup_answers_as_the_protocol_check_does() -> None:
    """``thinks_by_default(adapter, ...)`` is ``isinstance(adapter, ThinksByDefault)``
    and then the adapter's answer: a plain adapter, one whose member is ``None``, and
    one that answers either way."""
    model = DEFAULT_REGISTRY.model("anthropic", "claude-sonnet-4-5")
    for adapter in (_Plain(), _Unset(), _Thinks(True), _Thinks(False)):
        expected = isinstance(adapter, ThinksByDefault) and bool(
            adapter.thinks_by_default(GenerationSettings(), model))
        assert thinks_by_default(adapter, GenerationSettings(), model) is expected
    assert thinks_by_default(_Thinks(True), GenerationSettings(), model)


async def test_a_turn_asks_its_adapter_without_the_protocol_isinstance(
    live: tuple[EmulatedProviders, TurnEngine, MemoryStore], monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A runtime-checkable Protocol's ``isinstance`` walks the Protocol's members on
    every call (about 20 us a turn on Python 3.11): a turn looks the method up instead
    (issue 26). The turn still completes."""
    _, engine, store = live
    meta = type(ThinksByDefault)
    original = meta.__instancecheck__
    asked: list[object] = []

    def spy(cls: Any, instance: object) -> bool:
        if cls is ThinksByDefault:
            asked.append(instance)
        return original(cls, instance)

    monkeypatch.setattr(meta, "__instancecheck__", spy)
    chat = await store.create_chat(owner="o")
    outcome = await collect(engine.run_turn(chat.id, make_turn(
        "hi", provider="anthropic", model="claude-sonnet-4-5")))
    assert outcome.committed
    assert asked == []


async def test_both_samplers_are_refused_before_the_lease_as_the_api_refuses_them(
    live: tuple[EmulatedProviders, TurnEngine, MemoryStore],
) -> None:
    """Claude 4.x takes temperature or top_p: turnstate refuses both before the lease,
    and the emulator answers a request with both as the API does."""
    stack, engine, store = live
    chat = await store.create_chat(owner="o")
    with pytest.raises(InvalidInput) as caught:
        await collect(engine.run_turn(chat.id, make_turn(
            "hi", provider="anthropic", model="claude-sonnet-4-5",
            settings=GenerationSettings(temperature=0.5, top_p=0.9))))
    assert caught.value.field == "settings.top_p"
    assert not stack.emulators["anthropic"].requests
    await collect(engine.run_turn(chat.id, make_turn(
        "hi", provider="anthropic", model="claude-3-5-haiku",
        settings=GenerationSettings(temperature=0.5, top_p=0.9))))
    body = json.loads(stack.emulators["anthropic"].requests[-1].body)
    assert (body["temperature"], body["top_p"]) == (0.5, 0.9)


async def test_changing_settings_keeps_the_cursor(
    live: tuple[EmulatedProviders, TurnEngine, MemoryStore],
) -> None:
    _, engine, store = live
    chat = await store.create_chat(owner="o")
    first = await collect(engine.run_turn(chat.id, make_turn("one")))
    second = await collect(engine.run_turn(chat.id, make_turn(
        "two", settings=GenerationSettings(max_output_tokens=50, temperature=0.1,
                                           tool_choice="none"))))
    assert isinstance(first.final, TurnCompleted) and isinstance(second.final, TurnCompleted)
    assert second.final.strategy == "cursor" and second.final.degradation is None


async def test_max_output_tokens_cuts_the_answer_with_a_length_stop(
    live: tuple[EmulatedProviders, TurnEngine, MemoryStore],
) -> None:
    _, engine, store = live
    chat = await store.create_chat(owner="o")
    outcome = await collect(engine.run_turn(chat.id, make_turn(
        "please repeat these seven words back", provider="openai-compatible",
        settings=GenerationSettings(max_output_tokens=3))))
    final = outcome.final
    assert isinstance(final, TurnCompleted)
    assert final.text == "You said: please"
