"""Wire fidelity, round seven (wire7): the older Gemini text delta that carries its own
``annotations``, and the sweep's findings (one test per gap, each fails on the code
before)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.providers.support import parse_stream
from turnstate.core._citations import Citation
from turnstate.core._conversation import TextPart
from turnstate.providers._protocol import SseEvent, sse_event
from turnstate.providers.chat_completions import ChatCompletionsStreamParser
from turnstate.providers.deepseek import DeepSeekAdapter
from turnstate.providers.gemini_interactions._parser import InteractionsStreamParser


def frames(*pairs: tuple[str, Any]) -> list[SseEvent]:
    return [sse_event(data if isinstance(data, str) else json.dumps(data), name, None)
            for name, data in pairs]


def _gemini(*middle: tuple[str, Any]) -> list[SseEvent]:
    return frames(
        ("interaction.created", {"interaction": {"id": "v1_1", "status": "in_progress"},
                                 "event_type": "interaction.created"}),
        ("step.start", {"index": 0, "step": {"type": "model_output"},
                        "event_type": "step.start"}),
        *middle,
        ("step.stop", {"index": 0, "event_type": "step.stop"}),
        ("interaction.completed", {"interaction": {"id": "v1_1", "status": "completed"},
                                   "event_type": "interaction.completed"}),
        ("done", "[DONE]"))


def _delta(delta: dict[str, Any]) -> tuple[str, Any]:
    return ("step.delta", {"index": 0, "delta": delta, "event_type": "step.delta"})


def test_gemini_text_deltas_annotations_are_read_beside_annotation_deltas() -> None:
    """GENAI-PY's ``TextDelta`` (before ``text_annotation_delta``) had ``annotations``
    on the text delta itself: they were dropped, the answer cited nothing."""
    first = {"type": "url_citation", "url": "https://example.com/a", "start_index": 0,
             "end_index": 4}
    later = {"url": "https://example.com/b", "start_index": 5, "end_index": 9}
    response, deltas = parse_stream(InteractionsStreamParser(), _gemini(
        _delta({"type": "text", "text": "Oslo ", "annotations": [first]}),
        _delta({"type": "text", "text": "Bergen", "annotations": "junk"}),
        _delta({"type": "text_annotation_delta", "annotations": [later]}),
        _delta({"text": "!", "annotations": [7, {"no": "url"}]})))
    assert "".join(d.text for d in deltas) == "Oslo Bergen!"
    [part] = [p for p in response.parts if isinstance(p, TextPart)]
    assert part.text == "Oslo Bergen!"
    assert part.citations == (
        Citation(kind="url_citation", url="https://example.com/a", start=0, end=4),
        Citation(kind="url_citation", url="https://example.com/b", start=5, end=9))


def _chunk(delta: dict[str, Any], finish: str | None = None) -> SseEvent:
    return sse_event(json.dumps({"id": "c1", "object": "chat.completion.chunk", "model": "m",
                                 "choices": [{"index": 0, "delta": delta,
                                              "finish_reason": finish}]}), "message", None)


@pytest.mark.parametrize("parser", [lambda: ChatCompletionsStreamParser("openai-compatible"),
                                    lambda: DeepSeekAdapter(api_key="k").stream_parser()])
def test_chat_streams_skip_an_empty_data_line(parser: Any) -> None:
    """``data:`` with nothing after it (a keep-alive some OpenAI-compatible servers
    send): the SSE spec dispatches no event for it, and Anthropic, Gemini and Responses
    skip it; Chat Completions and DeepSeek failed the turn on it as a malformed frame."""
    response, deltas = parse_stream(parser(), [
        _chunk({"role": "assistant", "content": "Hi"}), sse_event("", "message", None),
        _chunk({}, "stop"), sse_event("[DONE]", "message", None)])
    assert [d.text for d in deltas] == ["Hi"]
    assert response.parts == (TextPart(text="Hi"),)


def test_gemini_cut_stream_bills_the_running_usage_of_its_last_step_stop() -> None:
    """2.5: ``step.stop`` may carry ``usage``, the running total. A stream cut after it
    billed nothing known (``billed()`` None: the turn's cost unknown); now that total, a
    floor under what the request cost. Before any such frame it is still None; the
    frames stay undecoded until a cut needs them (issue 26), a malformed one skipped."""
    parser = InteractionsStreamParser()
    head = _gemini(_delta({"type": "text", "text": "Oslo"}))[:3]
    for frame in head:
        parser.feed(frame)
    assert parser.billed() is None
    assert parser.feed(sse_event("{not json", "step.stop", None)) == ()  # kept undecoded
    assert parser.billed() is None  # and says nothing
    parser.feed(sse_event(json.dumps({
        "index": 0, "event_type": "step.stop", "usage": {
            "total_input_tokens": 11, "total_output_tokens": 4, "total_thought_tokens": 6,
            "total_cached_tokens": 2}}), "step.stop", None))
    billed = parser.billed()
    assert billed is not None
    assert (billed.input_tokens, billed.output_tokens, billed.cached_input_tokens,
            billed.reasoning_tokens) == (11, 10, 2, 6)
    assert not parser.done
