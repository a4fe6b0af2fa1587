"""A model's tool arguments nested thousands deep do not break the chat for the other
providers (attack4).

Chat Completions (and Responses) keep a call's arguments as the text the model sent and
send them back as text. Anthropic and Gemini send them as an object, decoded from that
text when the request is built: arguments nested 5,000 deep raised ``RecursionError``
there, so every later turn of the chat on either provider aborted "could not build the
request", and arguments nested 700 deep were sent as they were (a Gemini ``Struct``
takes 100 levels; the emulators answered 500). Arguments nested deeper than
``MAX_DEPTH`` now go as not an object (``{}`` to Anthropic, the text to Gemini).
"""

from __future__ import annotations

import json

import pytest

from tests.engine.support import FakeClock, collect, make_turn
from tests.faults.hostile import sse_server
from tests.faults.rig import quick_transport
from tests.faults.test_limits import MODELS
from turnstate.core._json import MAX_DEPTH, nested_deeper
from turnstate.emulators._emulated import EmulatedProviders, kind_of
from turnstate.engine import TurnEngine
from turnstate.providers.anthropic._blocks import tool_input, tool_input_json
from turnstate.providers.gemini_interactions._codec import arguments_object
from turnstate.storage import MemoryStore


def nested(depth: int) -> str:
    """An arguments object whose ``city`` nests ``depth`` objects more."""
    return '{"city":' + '{"a":' * depth + "1" + "}" * depth + "}"


def _chunks(*deltas: dict[str, object], finish: str) -> bytes:
    frames = [{"id": "r", "object": "chat.completion.chunk", "model": "gpt-4o-mini",
               "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
              for delta in deltas]
    frames.append({"id": "r", "object": "chat.completion.chunk", "model": "gpt-4o-mini",
                   "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
    return b"".join(b"data: " + json.dumps(f).encode() + b"\n\n" for f in frames) \
        + b"data: [DONE]\n\n"


def _call(arguments: str) -> bytes:
    return _chunks({"role": "assistant", "tool_calls": [{
        "index": 0, "id": "call_1", "type": "function",
        "function": {"name": "weather", "arguments": arguments}}]}, finish="tool_calls")


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 700, 5_000])
def test_arguments_nested_past_the_bound_are_not_sent_as_an_object(depth: int) -> None:
    text = nested(depth)
    assert tool_input(text) == {}
    assert tool_input_json(text) == "{}"
    assert arguments_object(text) == {"arguments": text}


def test_arguments_within_the_bound_are_sent_as_they_are() -> None:
    text = nested(MAX_DEPTH - 1)  # MAX_DEPTH objects in all
    assert tool_input(text) == json.loads(text)
    assert arguments_object(text) == json.loads(text)
    wide = json.dumps({"rows": [{"a": [1]} for _ in range(500)]})  # many brackets, shallow
    assert not nested_deeper(wide, json.loads(wide))
    assert tool_input(wide) == json.loads(wide)


@pytest.mark.parametrize("depth", [700, 5_000])
async def test_a_chat_with_deep_arguments_goes_on_with_anthropic_and_gemini(depth: int) -> None:
    store = MemoryStore(clock=FakeClock())
    chat = await store.create_chat(owner="deep")
    provider = "openai-compatible"
    answer = _chunks({"role": "assistant", "content": "done"}, finish="stop")
    async with sse_server(_call(nested(depth)), answer) as base, \
            quick_transport() as transport:
        adapter = kind_of(provider).adapter(base_url=base, api_key="k")
        engine = TurnEngine(store, {provider: adapter}, transport, clock=FakeClock())
        first = await collect(engine.run_turn(chat.id, make_turn(
            "hi", provider=provider, model=MODELS[provider])))
    assert first.final.type == "turn_completed", first.final
    async with EmulatedProviders() as stack, quick_transport() as transport:
        for provider in ("anthropic", "gemini"):
            adapter = kind_of(provider).adapter(base_url=stack.base_url(provider),
                                                api_key="k")
            engine = TurnEngine(store, {provider: adapter}, transport, clock=FakeClock())
            outcome = await collect(engine.run_turn(chat.id, make_turn(
                "again", provider=provider, model=MODELS[provider])))
            assert outcome.final.type == "turn_completed", (provider, outcome.final)
    assert (await store.load_chat(chat.id)).active_turn_id is None
