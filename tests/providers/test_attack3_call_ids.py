"""Anthropic and Chat Completions: a tool call whose id is empty or another call's of the
same answer gets a distinct id of its own (attack3).

Anthropic refuses a request whose ``tool_use`` ids repeat ("messages.1.content.1:
`tool_use` ids must be unique", 400 ``invalid_request_error``; anthropics/claude-code
#20901, #28515) and an empty id is outside its pattern. A stream (a relay, a gateway
translating another model) that sent two calls with one id, or with ``""`` or ``null``,
had both run and both sent back with that id: the loop's next request, and every later
request replaying the chat, carried the duplicate, and a Chat Completions call
repeating an earlier call's id did the same once the chat moved to Claude. Both
providers keep no state of their calls, so any distinct id pairs a call with its result.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import attrs
import pytest

from tests.engine.support import FakeClock, collect, make_turn
from tests.faults.hostile import sse_bytes, sse_server
from tests.faults.rig import quick_transport
from tests.helpers import chunk_events
from turnstate.core._conversation import ToolCallPart
from turnstate.engine import TurnEngine
from turnstate.providers import (
    AnthropicAdapter,
    ChatCompletionsAdapter,
    ProviderAdapter,
    ProviderResponse,
    SseEvent,
)
from turnstate.storage import MemoryStore

DATA = Path(__file__).resolve().parents[1] / "data"


def _anthropic_frames(first: Any, second: Any) -> list[dict[str, Any]]:
    def call(index: int, call_id: Any, city: str) -> list[dict[str, Any]]:
        return [
            {"type": "content_block_start", "index": index, "content_block": {
                "type": "tool_use", "id": call_id, "name": "weather", "input": {}}},
            {"type": "content_block_delta", "index": index, "delta": {
                "type": "input_json_delta", "partial_json": json.dumps({"city": city})}},
            {"type": "content_block_stop", "index": index}]

    return [
        {"type": "message_start", "message": {
            "id": "msg_dup", "type": "message", "role": "assistant",
            "model": "claude-sonnet-4-5", "content": [], "stop_reason": None,
            "usage": {"input_tokens": 10, "output_tokens": 1}}},
        *call(0, first, "Paris"), *call(1, second, "Rome"),
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"},
         "usage": {"output_tokens": 20}},
        {"type": "message_stop"}]


def _events(frames: list[dict[str, Any]]) -> list[SseEvent]:
    return [SseEvent(event=f["type"], data=json.dumps(f)) for f in frames]


def _finished(adapter: ProviderAdapter, events: list[SseEvent]) -> ProviderResponse:
    parser = adapter.stream_parser()
    for event in events:
        parser.feed(event)
    return parser.finish()


def _calls(response: ProviderResponse) -> list[ToolCallPart]:
    return [p for p in response.parts if isinstance(p, ToolCallPart)]


ANTHROPIC = AnthropicAdapter(base_url="http://127.0.0.1:1/v1", api_key="k")
CHAT = ChatCompletionsAdapter(base_url="http://127.0.0.1:1/v1", api_key="k")


@pytest.mark.parametrize(("first", "second"), [("toolu_1", "toolu_1"), ("", ""), (None, None),
                                               ("toolu_1", "")])
def test_anthropic_calls_get_distinct_ids(first: Any, second: Any) -> None:
    calls = _calls(_finished(ANTHROPIC, _events(_anthropic_frames(first, second))))
    ids = [c.call_id for c in calls]
    assert [c.arguments for c in calls] == ['{"city": "Paris"}', '{"city": "Rome"}']
    assert all(ids) and len(set(ids)) == 2, ids
    if first:
        assert ids[0] == first  # the first keeps the provider's id
    again = [c.call_id for c in _calls(_finished(ANTHROPIC, _events(
        _anthropic_frames(first, second))))]
    assert again == ids  # the same stream, the same ids (a replay sends the same bytes)


def test_anthropic_distinct_ids_are_left_as_they_are() -> None:
    calls = _calls(_finished(ANTHROPIC, _events(_anthropic_frames("toolu_a", "toolu_b"))))
    assert [c.call_id for c in calls] == ["toolu_a", "toolu_b"]


def test_a_chat_completions_call_repeating_an_id_gets_its_own() -> None:
    events = chunk_events(DATA / "chat-completions" / "parallel-tool-calls.chunks.txt",
                          event_key=None)
    dup = [attrs.evolve(e, data=e.data.replace('"call_rome"', '"call_paris"')) for e in events]
    ids = [c.call_id for c in _calls(_finished(CHAT, dup))]
    assert ids[0] == "call_paris" and len(set(ids)) == len(ids) == 2, ids


async def test_the_loop_sends_anthropic_distinct_tool_use_ids() -> None:
    """The engine over loopback: the loop's second request pairs each call with its
    result by an id of its own."""
    first = sse_bytes(_events(_anthropic_frames("toolu_1", "toolu_1")))
    text = [{"type": "message_start", "message": {
                "id": "msg_2", "type": "message", "role": "assistant",
                "model": "claude-sonnet-4-5", "content": [], "stop_reason": None,
                "usage": {"input_tokens": 10, "output_tokens": 1}}},
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text",
                                                                          "text": ""}},
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta",
                                                                  "text": "Sunny."}},
            {"type": "content_block_stop", "index": 0},
            {"type": "message_delta", "delta": {"stop_reason": "end_turn"},
             "usage": {"output_tokens": 3}},
            {"type": "message_stop"}]
    bodies: list[dict[str, Any]] = []
    store = MemoryStore(clock=FakeClock())
    chat = await store.create_chat(owner="dup")
    async with (sse_server(first, sse_bytes(_events(text)), bodies=bodies) as base,
                quick_transport() as transport):
        adapter = AnthropicAdapter(base_url=f"{base}/v1", api_key="k")
        engine = TurnEngine(store, {"anthropic": adapter}, transport, clock=FakeClock())
        outcome = await collect(engine.run_turn(chat.id, make_turn(
            "weather?", provider="anthropic", model="claude-sonnet-4-5")))
    assert outcome.committed, outcome.final
    blocks = [b for m in bodies[1]["messages"] if isinstance(m["content"], list)
              for b in m["content"]]
    uses = [b["id"] for b in blocks if b["type"] == "tool_use"]
    results = [b["tool_use_id"] for b in blocks if b["type"] == "tool_result"]
    assert len(uses) == 2 and len(set(uses)) == 2, uses
    assert results == uses
