"""A Gemini ``step.delta`` whose step never started (no ``step.start`` for its index:
a relay that dropped the frame) is kept as it is shown.

The parser made a step without a type for it, streamed its text (or thought summary)
to the user, and then dropped the step when the response was built (a step with no
type becomes no part): the user saw an answer the chat never stored.
"""

from __future__ import annotations

import json
from typing import Any

from turnstate.core._conversation import ReasoningPart, TextPart
from turnstate.providers import ReasoningDelta, SseEvent, TextDelta
from turnstate.providers.gemini_interactions import InteractionsStreamParser


def frame(data: dict[str, Any]) -> SseEvent:
    return SseEvent(data=json.dumps(data), event=data["event_type"])


def parse(*frames: dict[str, Any]) -> tuple[list[Any], Any]:
    parser = InteractionsStreamParser()
    shown: list[Any] = []
    for data in (
        {"interaction": {"id": "v1_a", "status": "in_progress", "model": "gemini-2.5-flash"},
         "event_type": "interaction.created"},
        *frames,
        {"interaction": {"id": "v1_a", "status": "completed"},
         "event_type": "interaction.completed"},
    ):
        shown.extend(parser.feed(frame(data)))
    return shown, parser.finish()


def test_a_text_delta_without_its_step_start_is_kept() -> None:
    shown, response = parse(
        {"index": 0, "delta": {"type": "text", "text": "Hello"}, "event_type": "step.delta"},
        {"index": 0, "delta": {"type": "text", "text": " there"}, "event_type": "step.delta"},
        {"index": 0, "event_type": "step.stop"})
    assert "".join(d.text for d in shown if isinstance(d, TextDelta)) == "Hello there"
    assert [p.text for p in response.parts if isinstance(p, TextPart)] == ["Hello there"]


def test_a_thought_summary_without_its_step_start_is_kept() -> None:
    shown, response = parse(
        {"index": 0, "delta": {"type": "thought_summary",
                               "content": {"type": "text", "text": "Planning"}},
         "event_type": "step.delta"},
        {"index": 1, "step": {"type": "model_output"}, "event_type": "step.start"},
        {"index": 1, "delta": {"type": "text", "text": "Done."}, "event_type": "step.delta"})
    assert "".join(d.text for d in shown if isinstance(d, ReasoningDelta)) == "Planning"
    assert [p.text for p in response.parts if isinstance(p, ReasoningPart)] == ["Planning"]
    assert [p.text for p in response.parts if isinstance(p, TextPart)] == ["Done."]
