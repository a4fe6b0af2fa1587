"""wire8: a streamed refusal finishes "refusal" when the terminal frame has no ``output``."""

from __future__ import annotations

import json
from typing import Any

import pytest

from turnstate.core._conversation import TextPart
from turnstate.providers import SseEvent, TextDelta
from turnstate.providers.openai_responses import ResponsesStreamParser


def _event(frame: dict[str, Any]) -> SseEvent:
    return SseEvent(event=frame["type"], data=json.dumps(frame))


def _frames(*, done_frame: bool, item_done: bool, terminal: str) -> list[SseEvent]:
    head = {"id": "resp_w8", "model": "gpt-5-mini", "status": "in_progress"}
    frames: list[dict[str, Any]] = [
        {"type": "response.created", "response": head},
        {"type": "response.output_item.added", "output_index": 0,
         "item": {"id": "msg_w8", "type": "message", "role": "assistant", "content": []}},
        {"type": "response.refusal.delta", "item_id": "msg_w8", "output_index": 0,
         "content_index": 0, "delta": "I can't "},
        {"type": "response.refusal.delta", "item_id": "msg_w8", "output_index": 0,
         "content_index": 0, "delta": "help"},
    ]
    if done_frame:
        frames.append({"type": "response.refusal.done", "item_id": "msg_w8", "output_index": 0,
                       "content_index": 0, "refusal": "I can't help with that."})
    if item_done:
        frames.append({"type": "response.output_item.done", "output_index": 0, "item": {
            "id": "msg_w8", "type": "message", "role": "assistant",
            "content": [{"type": "refusal", "refusal": "I can't help with that."}]}})
    final: dict[str, Any] = {"id": "resp_w8", "model": "gpt-5-mini", "status": terminal}
    if terminal == "incomplete":
        final["incomplete_details"] = {"reason": "max_output_tokens"}
    frames.append({"type": f"response.{terminal}", "response": final})  # no ``output``
    return [_event(frame) for frame in frames]


@pytest.mark.parametrize("batched", [False, True], ids=["feed", "feed_many"])
@pytest.mark.parametrize("item_done", [False, True], ids=["no-item-done", "item-done"])
@pytest.mark.parametrize("done_frame", [False, True], ids=["deltas", "refusal-done"])
def test_streamed_refusal_without_terminal_output(
        batched: bool, item_done: bool, done_frame: bool) -> None:
    parser = ResponsesStreamParser()
    events = _frames(done_frame=done_frame, item_done=item_done, terminal="completed")
    deltas: list[Any] = []
    if batched:
        parser.feed_many(events, deltas)
    else:
        for event in events:
            deltas.extend(parser.feed(event))
    assert parser.done
    response = parser.finish()
    assert response.finish_reason == "refusal"
    texts = [p.text for p in response.parts if isinstance(p, TextPart)]
    whole = "I can't help with that." if done_frame or item_done else "I can't help"
    assert texts == [whole]
    streamed = "".join(d.text for d in deltas if isinstance(d, TextDelta))
    assert streamed == ("I can't help with that." if done_frame else "I can't help")


def test_refusal_then_incomplete_keeps_length() -> None:
    parser = ResponsesStreamParser()
    for event in _frames(done_frame=False, item_done=False, terminal="incomplete"):
        parser.feed(event)
    assert parser.finish().finish_reason == "length"


def test_text_stream_without_terminal_output_is_stop() -> None:
    parser = ResponsesStreamParser()
    frames = [
        {"type": "response.output_item.added", "output_index": 0,
         "item": {"id": "m", "type": "message", "content": []}},
        {"type": "response.output_text.delta", "output_index": 0, "item_id": "m", "delta": "Hi"},
        {"type": "response.completed", "response": {"id": "r", "status": "completed"}},
    ]
    out: list[Any] = []
    parser.feed_many([_event(f) for f in frames], out)
    response = parser.finish()
    assert response.finish_reason == "stop"
    assert [p.text for p in response.parts if isinstance(p, TextPart)] == ["Hi"]
