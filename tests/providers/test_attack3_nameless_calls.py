"""Anthropic and Gemini: a tool call without a name is a protocol error (attack3).

A ``tool_use`` block (or a Gemini ``function_call`` step) whose ``name`` was ``null``,
``""`` or not a string became a call named ``""``: run as ``unknown tool ''`` and sent
back to the provider with that empty name in the loop's next request and in every later
replay of the chat. There is no tool to run and no call the model made that its result
could answer, as Chat Completions (``tool call at index 0 has no name``) and now OpenAI
Responses already say: the turn fails cleanly, typed, before any tool runs.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.engine.support import FakeClock, collect, make_turn, tool
from tests.faults.hostile import sse_bytes, sse_server
from tests.faults.rig import quick_transport
from turnstate.core._errors import ProviderProtocolError
from turnstate.engine import TurnEngine
from turnstate.providers import (
    AnthropicAdapter,
    GeminiInteractionsAdapter,
    ProviderAdapter,
    SseEvent,
)
from turnstate.storage import MemoryStore

NAMES = [None, "", 7, {"a": 1}]


def _anthropic(name: Any) -> list[SseEvent]:
    frames = [
        {"type": "message_start", "message": {
            "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
            "content": [], "stop_reason": None, "usage": {"input_tokens": 10, "output_tokens": 1}}},
        {"type": "content_block_start", "index": 0, "content_block": {
            "type": "tool_use", "id": "toolu_1", "name": name, "input": {}}},
        {"type": "content_block_delta", "index": 0, "delta": {
            "type": "input_json_delta", "partial_json": '{"city": "Paris"}'}},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"},
         "usage": {"output_tokens": 20}},
        {"type": "message_stop"}]
    return [SseEvent(event=f["type"], data=json.dumps(f)) for f in frames]


def _gemini(name: Any) -> list[SseEvent]:
    frames = [
        {"interaction": {"id": "v1_x", "object": "interaction", "model": "gemini-2.5-flash",
                         "status": "in_progress"}, "event_type": "interaction.created"},
        {"index": 0, "step": {"id": "call1", "type": "function_call", "name": name,
                              "arguments": {}}, "event_type": "step.start"},
        {"index": 0, "delta": {"type": "arguments_delta", "arguments": '{"city": "Paris"}'},
         "event_type": "step.delta"},
        {"index": 0, "event_type": "step.stop"},
        {"interaction": {"id": "v1_x", "status": "requires_action", "model": "gemini-2.5-flash",
                         "usage": {"total_input_tokens": 10, "total_output_tokens": 5}},
         "event_type": "interaction.completed"}]
    return [SseEvent(event=f["event_type"], data=json.dumps(f)) for f in frames]


ADAPTERS: dict[str, tuple[ProviderAdapter, Any, str]] = {
    "anthropic": (AnthropicAdapter(base_url="http://127.0.0.1:1/v1", api_key="k"), _anthropic,
                  "claude-sonnet-4-5"),
    "gemini": (GeminiInteractionsAdapter(base_url="http://127.0.0.1:1", api_key="k"), _gemini,
               "gemini-2.5-flash"),
}


@pytest.mark.parametrize("name", NAMES, ids=["null", "empty", "number", "object"])
@pytest.mark.parametrize("provider", sorted(ADAPTERS))
def test_a_call_without_a_name_is_a_protocol_error(provider: str, name: Any) -> None:
    adapter, frames, _ = ADAPTERS[provider]
    parser = adapter.stream_parser()
    with pytest.raises(ProviderProtocolError, match="has no name"):
        for event in frames(name):
            parser.feed(event)
        parser.finish()


def test_a_named_call_still_parses() -> None:
    for adapter, frames, _ in ADAPTERS.values():
        parser = adapter.stream_parser()
        for event in frames("weather"):
            parser.feed(event)
        assert [getattr(p, "name", None) for p in parser.finish().parts] == ["weather"]


@pytest.mark.parametrize("provider", sorted(ADAPTERS))
async def test_the_turn_fails_cleanly_and_no_tool_runs(provider: str) -> None:
    adapter_of, frames, model = ADAPTERS[provider]
    del adapter_of
    bodies: list[dict[str, Any]] = []
    ran: list[dict[str, Any]] = []

    async def anything(arguments: dict[str, Any]) -> Any:
        ran.append(arguments)
        return "ran"

    store = MemoryStore(clock=FakeClock())
    chat = await store.create_chat(owner="nameless")
    async with (sse_server(sse_bytes(frames(None)), bodies=bodies) as base,
                quick_transport() as transport):
        adapter = (AnthropicAdapter if provider == "anthropic" else GeminiInteractionsAdapter)(
            base_url=base + ("/v1" if provider == "anthropic" else ""), api_key="k")
        engine = TurnEngine(store, {provider: adapter}, transport, clock=FakeClock())
        outcome = await collect(engine.run_turn(chat.id, make_turn(
            "weather?", provider=provider, model=model, tools=(tool("weather", anything),))))
    final = outcome.final
    assert final.type == "turn_aborted" and final.reason == "provider_failed", final
    assert "has no name" in (final.detail or "")
    assert not ran and len(bodies) == 1
    assert (await store.load_chat(chat.id)).active_turn_id is None
    messages = await store.list_messages(chat.id)
    assert messages[0].parts[0].text == "weather?"  # type: ignore[union-attr]
