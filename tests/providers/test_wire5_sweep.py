"""The documented terminal states and odd frames of each wire format, read as the
reference says (providers-wire.md; each test names its section)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.providers.support import parse_stream
from turnstate.core._errors import FatalProviderError, RateLimited, TransientProviderError
from turnstate.providers._protocol import SseEvent, sse_event
from turnstate.providers.anthropic._stream import AnthropicStreamParser
from turnstate.providers.chat_completions import ChatCompletionsStreamParser
from turnstate.providers.gemini_interactions._parser import InteractionsStreamParser
from turnstate.providers.openai_responses._parser import ResponsesStreamParser


def events(*frames: tuple[str, Any]) -> list[SseEvent]:
    return [sse_event(data if isinstance(data, str) else json.dumps(data), name, None)
            for name, data in frames]


# --- OpenAI Responses (section 1.4 status values, 1.5 terminal events and errors) ------

def _created() -> tuple[str, Any]:
    return ("response.created", {"type": "response.created", "response": _resp("in_progress")})


def _resp(status: str, **fields: Any) -> dict[str, Any]:
    return {"id": "resp_1", "object": "response", "status": status, "output": [],
            "usage": None, **fields}


USAGE = {"input_tokens": 3, "output_tokens": 2, "total_tokens": 5}


def test_responses_a_cancelled_response_is_not_a_finished_answer() -> None:
    """1.4: ``status`` may be ``cancelled``; it was read as ``stop``, then as the finish
    ``cancelled`` (the turn's ``other``, committed): now the turn fails (wire6)."""
    with pytest.raises(FatalProviderError) as caught:
        parse_stream(ResponsesStreamParser(), events(_created(), (
            "response.completed", {"type": "response.completed",
                                   "response": _resp("cancelled", usage=USAGE)})))
    assert caught.value.code == "cancelled"


def test_responses_incomplete_for_max_output_tokens_is_length() -> None:
    """1.4: ``incomplete_details.reason`` ``max_output_tokens``; 1.5 ``response.incomplete``."""
    response, _ = parse_stream(ResponsesStreamParser(), events(_created(), (
        "response.incomplete", {"type": "response.incomplete", "response": _resp(
            "incomplete", incomplete_details={"reason": "max_output_tokens"}, usage=USAGE)})))
    assert (response.finish_reason, response.raw_finish_reason) == ("length",
                                                                    "max_output_tokens")


@pytest.mark.parametrize(("frame", "error"), [
    ({"type": "error", "code": "rate_limit_exceeded", "message": "slow", "param": None,
      "sequence_number": 1}, RateLimited),
    ({"type": "error", "sequence_number": 2, "error": {
        "type": "insufficient_quota", "code": "insufficient_quota", "message": "q",
        "param": None}}, FatalProviderError)])
def test_responses_error_events_flat_and_nested(frame: dict[str, Any], error: type) -> None:
    """1.5: the SDK's flat ``error`` event and the recorded nested one."""
    parser = ResponsesStreamParser()
    parser.feed(events(_created())[0])
    with pytest.raises(error):
        parser.feed(events(("error", frame))[0])


def test_responses_unknown_events_and_items_are_tolerated() -> None:
    """General SSE notes: unknown event types are ignored, not fatal."""
    item = {"type": "future_item", "id": "x"}
    response, _ = parse_stream(ResponsesStreamParser(), events(
        _created(), ("response.future", {"type": "response.future"}),
        ("response.output_item.added", {"type": "response.output_item.added",
                                        "output_index": 0, "item": item}),
        ("response.output_item.done", {"type": "response.output_item.done",
                                       "output_index": 0, "item": item}),
        ("response.completed", {"type": "response.completed", "response": _resp(
            "completed", output=[item], usage=USAGE)})))
    assert response.finish_reason == "stop"


# --- Anthropic (section 5.3 stop reasons, 5.4 errors) ------------------------------------

START = {"type": "message_start", "message": {
    "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
    "content": [], "stop_reason": None, "usage": {"input_tokens": 10, "output_tokens": 1}}}
TEXT = [("content_block_start", {"type": "content_block_start", "index": 0,
                                 "content_block": {"type": "text", "text": ""}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                 "delta": {"type": "text_delta", "text": "hi"}}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0})]


@pytest.mark.parametrize(("stop", "finish"), [
    ("end_turn", "stop"), ("max_tokens", "length"), ("stop_sequence", "stop"),
    ("refusal", "refusal"),
    ("model_context_window_exceeded", "length")])
def test_anthropic_every_documented_stop_reason(stop: str, finish: str) -> None:
    """5.3: the seven ``stop_reason`` values (``tool_use`` and ``pause_turn``, a typed
    end, have their own tests)."""
    response, _ = parse_stream(AnthropicStreamParser(), events(
        ("message_start", START), *TEXT,
        ("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop},
                           "usage": {"output_tokens": 5}}),
        ("message_stop", {"type": "message_stop"})))
    assert (response.finish_reason, response.raw_finish_reason) == (finish, stop)
    assert response.parts[-1].text == "hi"  # type: ignore[union-attr]


def test_anthropic_an_error_after_200_is_raised_typed() -> None:
    """5.4: ``event: error`` mid-stream, ``overloaded_error`` (retryable)."""
    parser = AnthropicStreamParser()
    for event in events(("message_start", START), *TEXT):
        parser.feed(event)
    with pytest.raises(TransientProviderError, match="Overloaded"):
        parser.feed(events(("error", {"type": "error", "error": {
            "type": "overloaded_error", "message": "Overloaded"}}))[0])


# --- Chat Completions (section 3.3 finish reasons, 3.2 refusal) ----------------------------

def _chunk(delta: dict[str, Any], finish: str | None = None) -> tuple[str, Any]:
    return ("", {"id": "c1", "object": "chat.completion.chunk", "model": "m",
                 "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})


def test_chat_refusal_and_content_filter() -> None:
    """3.3: ``refusal`` on the message; ``finish_reason`` ``content_filter``."""
    refused, _ = parse_stream(ChatCompletionsStreamParser("openai-compatible"), events(
        _chunk({"role": "assistant", "refusal": "I can't."}), _chunk({}, "stop"),
        ("", "[DONE]")))
    assert refused.finish_reason == "refusal" and refused.parts[0].text == "I can't."  # type: ignore[union-attr]
    filtered, _ = parse_stream(ChatCompletionsStreamParser("openai-compatible"), events(
        _chunk({"content": "a"}), _chunk({}, "content_filter"), ("", "[DONE]")))
    assert filtered.finish_reason == "content_filter"


# --- Gemini Interactions (section 2.3 status values, 2.5 events) --------------------------

def _gemini(status: str) -> list[SseEvent]:
    return events(
        ("interaction.created", {"interaction": {"id": "v1_1", "status": "in_progress"},
                                 "event_type": "interaction.created"}),
        ("step.start", {"index": 0, "step": {"type": "model_output"},
                        "event_type": "step.start"}),
        ("step.delta", {"index": 0, "delta": {"type": "text", "text": "hi"},
                        "event_type": "step.delta"}),
        ("step.delta", {"index": 0, "delta": {"type": "text_annotation_delta"},
                        "event_type": "step.delta"}),
        ("step.stop", {"index": 0, "event_type": "step.stop"}),
        ("future.event", {"event_type": "future.event"}),
        ("interaction.completed", {"interaction": {"id": "v1_1", "status": status, "usage": {
            "total_input_tokens": 3, "total_output_tokens": 2}},
            "event_type": "interaction.completed"}),
        ("done", "[DONE]"))


@pytest.mark.parametrize(("status", "finish"), [
    ("completed", "stop"), ("incomplete", "length"), ("budget_exceeded", "length")])
def test_gemini_status_values(status: str, finish: str) -> None:
    """2.3: the ``status`` values a finished stream can carry; unknown events ignored."""
    response, _ = parse_stream(InteractionsStreamParser(), _gemini(status))
    assert (response.finish_reason, response.raw_finish_reason) == (finish, status)


def test_gemini_a_failed_interaction_raises() -> None:
    """2.3 ``failed``; 2.5's error event shape is the ``errors`` entry."""
    with pytest.raises(FatalProviderError):
        parse_stream(InteractionsStreamParser(), _gemini("failed"))
