"""Nothing silently dropped: random known and unknown blocks through parser and replay."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import example, given

from tests.strategies import wire_segments
from turnstate.core._conversation import OpaquePart, TextPart, ToolCallPart
from turnstate.core._decisions import Strategy
from turnstate.core._registry import DEFAULT_REGISTRY
from turnstate.providers import AnthropicAdapter, ProviderCall, SseEvent, TextDelta
from turnstate.providers.anthropic import AnthropicStreamParser, parse_response_body

MODEL = "claude-sonnet-4-5"
ADAPTER = AnthropicAdapter(base_url="http://127.0.0.1:1/v1", api_key="k")
CALL = ProviderCall(strategy=Strategy.LOCAL_LOOP, tools=(), system_prompt="",
                    model=DEFAULT_REGISTRY.model("anthropic", MODEL))


def frame(payload: dict[str, Any]) -> SseEvent:
    return SseEvent(data=json.dumps(payload), event=str(payload["type"]))


def anthropic_stream(segments: list[Any]) -> list[SseEvent]:
    """The Messages stream of ``segments``: one block per text, call or opaque segment."""
    out = [frame({"type": "message_start", "message": {
        "id": "msg_p", "type": "message", "role": "assistant", "model": MODEL, "content": [],
        "usage": {"input_tokens": 1, "output_tokens": 1}}})]
    index = 0
    for segment in segments:
        if segment[0] == "event":
            out.append(frame({"type": segment[1], "index": index}))
            continue
        if segment[0] == "text":
            out.append(frame({"type": "content_block_start", "index": index,
                              "content_block": {"type": "text", "text": ""}}))
            out += [frame({"type": "content_block_delta", "index": index,
                           "delta": {"type": "text_delta", "text": piece}})
                    for piece in segment[1]]
        elif segment[0] == "call":
            out.append(frame({"type": "content_block_start", "index": index, "content_block": {
                "type": "tool_use", "id": f"toolu_{index}", "name": segment[1], "input": {}}}))
            out.append(frame({"type": "content_block_delta", "index": index, "delta": {
                "type": "input_json_delta", "partial_json": json.dumps(segment[2])}}))
        else:
            out.append(frame({"type": "content_block_start", "index": index,
                              "content_block": {"type": segment[1], **segment[2]}}))
        out.append(frame({"type": "content_block_stop", "index": index}))
        index += 1
    out.append(frame({"type": "message_delta", "delta": {"stop_reason": "end_turn"},
                      "usage": {"output_tokens": 5}}))
    out.append(frame({"type": "message_stop"}))
    return out


def _text_runs(segments: list[Any]) -> list[str]:
    """The texts between the blocks that go back (calls, opaque blocks), each run joined."""
    runs, run = [], ""
    for segment in segments:
        if segment[0] == "text":
            run += "".join(segment[1])
        elif segment[0] in ("call", "opaque"):
            runs.append(run)
            run = ""
    return [*runs, run]


@given(wire_segments)
@example([("text", [" "])])  # whitespace only: no message goes back
@example([("text", ["0"]), ("call", "weather", {}), ("text", ["\r"])])  # a blank run after a
# call is left out, the text before it kept (found by attack2's run, 2026-12-04)
@example([("text", [" \n"]), ("call", "weather", {})])  # the call goes back, the blank text not
@example([("text", [" "]), ("text", ["a"])])  # blank beside text: sent with it
def test_every_text_byte_and_unknown_block_survives_and_replays(segments: list[Any]) -> None:
    parser = AnthropicStreamParser()
    deltas = [d for event in anthropic_stream(segments) for d in parser.feed(event)]
    response = parser.finish()
    texts = "".join("".join(s[1]) for s in segments if s[0] == "text")
    assert "".join(p.text for p in response.parts if isinstance(p, TextPart)) == texts
    assert "".join(d.text for d in deltas if isinstance(d, TextDelta)) == texts
    opaque = [{"type": s[1], **s[2]} for s in segments if s[0] == "opaque"]
    assert [json.loads(p.raw) for p in response.parts if isinstance(p, OpaquePart)] == opaque
    # Sent back to the same model and read again, the message means the same.
    # Consecutive texts go back as one block at their place, and a block of whitespace
    # only is left out: Anthropic refuses a whitespace-only text block (hunt-wire,
    # 2026-12-04), so a reply of such text alone is no message at all.
    replayed = "".join(run for run in _text_runs(segments) if not run.isspace())
    messages = ADAPTER.extend_loop(CALL, response, ()) if response.parts else ()
    message = messages[-1] if messages else None
    if message is None:
        assert not replayed and not opaque and not response.tool_calls
        return
    again = parse_response_body({"type": "message", "id": "msg_p", "model": MODEL,
                                 "content": message["content"], "stop_reason": "end_turn"})
    assert [p for p in again.parts if isinstance(p, OpaquePart)] == [
        p for p in response.parts if isinstance(p, OpaquePart)]
    assert [(c.call_id, c.name, json.loads(c.arguments)) for c in again.tool_calls] == [
        (c.call_id, c.name, json.loads(c.arguments)) for c in response.tool_calls]
    assert "".join(p.text for p in again.parts if isinstance(p, TextPart)) == replayed
    assert not [p for p in again.parts if isinstance(p, ToolCallPart) and p.name == "parallel"]
