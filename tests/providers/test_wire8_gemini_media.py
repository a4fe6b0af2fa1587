"""wire8: Gemini Interactions image / audio output is counted in the audit, not dropped
silently (no conversation part holds it; providers-wire.md 2.5 names it, no shape)."""

from __future__ import annotations

import json
from typing import Any

from turnstate.core._conversation import TextPart
from turnstate.providers import SseEvent
from turnstate.providers.gemini_interactions import InteractionsStreamParser, parse_response_body

_IMAGE = {"type": "image", "data": "iVBORw0KGgo=", "mime_type": "image/png"}
_AUDIO = {"type": "audio", "data": "UklGRg==", "mime_type": "audio/wav"}


def _event(frame: dict[str, Any]) -> SseEvent:
    return SseEvent(event=frame["event_type"], data=json.dumps(frame))


def _stream(*frames: dict[str, Any]) -> list[SseEvent]:
    head = {"event_type": "interaction.created",
            "interaction": {"id": "v1_w8", "model": "gemini-3-flash", "status": "in_progress"}}
    tail = {"event_type": "interaction.completed", "interaction": {
        "id": "v1_w8", "status": "completed",
        "usage": {"total_input_tokens": 3, "total_output_tokens": 5}}}
    return [_event(head), *(_event(f) for f in frames), _event(tail)]


def test_streamed_image_and_audio_deltas_are_counted() -> None:
    parser = InteractionsStreamParser()
    events = _stream(
        {"event_type": "step.start", "index": 0, "step": {"type": "model_output"}},
        {"event_type": "step.delta", "index": 0, "delta": {"type": "text", "text": "Here:"}},
        {"event_type": "step.delta", "index": 0, "delta": _IMAGE},
        {"event_type": "step.delta", "index": 0, "delta": _IMAGE},
        {"event_type": "step.stop", "index": 0},
        {"event_type": "step.start", "index": 1,
         "step": {"type": "model_output", "content": [_AUDIO, {"type": "text", "text": "!"}]}},
        {"event_type": "step.delta", "index": 1, "delta": _AUDIO},
        {"event_type": "step.stop", "index": 1},
    )
    for event in events:
        parser.feed(event)
    response = parser.finish()
    assert response.metadata.get("droppedOutput") == {"audio": 2, "image": 2}
    assert [p.text for p in response.parts if isinstance(p, TextPart)] == ["Here:", "!"]
    assert response.finish_reason == "stop"


def test_a_body_counts_its_media_blocks() -> None:
    body = {"id": "v1_w8b", "status": "completed", "model": "gemini-3-flash",
            "steps": [{"type": "model_output",
                       "content": [{"type": "text", "text": "Hi"}, _IMAGE, _IMAGE, _AUDIO]}]}
    response = parse_response_body(body)
    assert response.metadata.get("droppedOutput") == {"audio": 1, "image": 2}
    assert [p.text for p in response.parts if isinstance(p, TextPart)] == ["Hi"]


def test_a_text_answer_says_nothing_dropped() -> None:
    parser = InteractionsStreamParser()
    for event in _stream(
            {"event_type": "step.start", "index": 0, "step": {"type": "model_output"}},
            {"event_type": "step.delta", "index": 0, "delta": {"type": "text", "text": "Hi"}}):
        parser.feed(event)
    assert "droppedOutput" not in parser.finish().metadata
