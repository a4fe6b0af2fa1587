"""Round-2 wire defects (wiresmall): ends of a turn a parser read as an answer, and a
step Gemini refuses that was replayed (providers-wire.md; each test names its section)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.providers.support import (
    cursor_defaults,
    message,
    parse_stream,
    provider_call,
    request_json,
)
from turnstate.core._conversation import OpaquePart, Role, TextPart
from turnstate.core._decisions import Strategy
from turnstate.core._errors import (
    FatalProviderError,
    ProviderProtocolError,
    TransientProviderError,
)
from turnstate.core._registry import DEFAULT_REGISTRY
from turnstate.providers._protocol import SseEvent, sse_event
from turnstate.providers.anthropic._stream import AnthropicStreamParser, parse_response_body
from turnstate.providers.chat_completions import ChatCompletionsStreamParser
from turnstate.providers.gemini_interactions import GeminiInteractionsAdapter
from turnstate.providers.gemini_interactions import parse_response_body as gemini_body
from turnstate.providers.gemini_interactions._parser import InteractionsStreamParser


def events(*frames: tuple[str, Any]) -> list[SseEvent]:
    return [sse_event(data if isinstance(data, str) else json.dumps(data), name, None)
            for name, data in frames]


# --- 1. Gemini: interaction.completed with a status that is not terminal (2.3, 2.5) ---

def _gemini(status: str, *steps: tuple[str, Any]) -> list[SseEvent]:
    return events(
        ("interaction.created", {"interaction": {"id": "v1_1", "status": "in_progress"},
                                 "event_type": "interaction.created"}),
        ("step.start", {"index": 0, "step": {"type": "model_output"},
                        "event_type": "step.start"}),
        ("step.delta", {"index": 0, "delta": {"type": "text", "text": "hal"},
                        "event_type": "step.delta"}),
        ("step.stop", {"index": 0, "event_type": "step.stop"}),
        *steps,
        ("interaction.completed", {"interaction": {"id": "v1_1", "status": status, "usage": {
            "total_input_tokens": 3, "total_output_tokens": 2}},
            "event_type": "interaction.completed"}),
        ("done", "[DONE]"))


@pytest.mark.parametrize("status", ["in_progress", "queued"])
def test_gemini_a_pending_status_is_not_a_completed_answer(status: str) -> None:
    """2.3: ``in_progress`` and ``queued`` say the interaction has not finished: the text
    so far is a fragment. It was the finish reason (the turn's ``other``)."""
    parser = InteractionsStreamParser()
    for event in _gemini(status):
        parser.feed(event)
    with pytest.raises(TransientProviderError, match=status) as caught:
        parser.finish()
    assert caught.value.code == status


def test_gemini_a_pending_body_is_not_a_completed_answer() -> None:
    """2.3, a non-streaming body with ``status: in_progress`` (turnstate never asks for
    ``background``)."""
    with pytest.raises(TransientProviderError, match="in_progress"):
        gemini_body({"id": "v1_1", "status": "in_progress", "steps": [
            {"type": "model_output", "content": [{"type": "text", "text": "hal"}]}]})


# --- 4. Gemini: an unknown step type is kept but never replayed (2.3 step types) --------

MODEL = DEFAULT_REGISTRY.model("gemini", "gemini-2.5-flash")
SEARCH = {"type": "google_search_call", "id": "s1", "arguments": {"queries": ["oslo"]},
          "signature": "c2ln"}
FUTURE = {"type": "future_step", "id": "f1", "payload": {"x": 1}}


def test_gemini_an_unknown_step_is_stored_opaque() -> None:
    """2.5: forward compatibility: a step of an undocumented type stays in the answer."""
    response, _ = parse_stream(InteractionsStreamParser(), _gemini(
        "completed",
        ("step.start", {"index": 1, "step": FUTURE, "event_type": "step.start"}),
        ("step.stop", {"index": 1, "event_type": "step.stop"})))
    kinds = [p.kind for p in response.parts if isinstance(p, OpaquePart)]
    assert kinds == ["future_step"]


def test_gemini_replay_drops_steps_of_undocumented_types() -> None:
    """2.3: Gemini answers 400 "Invalid step type" to a step it does not know, so every
    later replay of the chat failed. A documented server-tool step is still replayed."""
    history = (
        message(1, Role.USER, TextPart(text="Weather in Oslo?")),
        message(2, Role.ASSISTANT,
                OpaquePart(provider="gemini", model="gemini-2.5-flash", kind="google_search_call",
                           raw=json.dumps(SEARCH)),
                OpaquePart(provider="gemini", model="gemini-2.5-flash", kind="future_step",
                           raw=json.dumps(FUTURE)),
                TextPart(text="Cold.")),
    )
    call = provider_call(cursor_defaults(MODEL, ()), strategy=Strategy.REPLAY,
                         history=history, user_text="Thanks")
    sent = request_json(GeminiInteractionsAdapter(api_key="k"), call)
    assert [step["type"] for step in sent["input"]] == [
        "user_input", "google_search_call", "model_output", "user_input"]
    assert sent["input"][1] == SEARCH


# --- 2. Chat Completions: [DONE] with no finish_reason (3.4) -----------------------------

def _chunk(delta: dict[str, Any], finish: str | None = None) -> tuple[str, Any]:
    return ("", {"id": "c1", "object": "chat.completion.chunk", "model": "m",
                 "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})


@pytest.mark.parametrize("delta", [
    {"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                     "function": {"name": "weather", "arguments": "{\"city\": \"Os"}}]},
])
def test_chat_done_without_a_finish_reason_is_a_cut_stream(delta: dict[str, Any]) -> None:
    """3.4: the final content chunk carries ``finish_reason``; a stream that reaches
    ``[DONE]`` without one after a tool call (a relay that closes a cut upstream with
    ``[DONE]``) completed with finish None, a half call run."""
    parser = ChatCompletionsStreamParser("openai-compatible")
    for event in events(_chunk({"role": "assistant", "content": ""}), _chunk(delta),
                        ("", "[DONE]")):
        parser.feed(event)
    assert parser.done
    with pytest.raises(ProviderProtocolError, match="no finish_reason") as caught:
        parser.finish()
    assert caught.value.code == "no_finish_reason"


def test_chat_done_after_a_finish_reason_still_completes() -> None:
    """3.4: the ordinary ending (``finish_reason`` then ``[DONE]``) is unchanged."""
    response, _ = parse_stream(ChatCompletionsStreamParser("openai-compatible"), events(
        _chunk({"content": "hi"}), _chunk({}, "stop"), ("", "[DONE]")))
    assert response.finish_reason == "stop"


# --- 3. Anthropic: stop_reason pause_turn (5.3) ------------------------------------------

PAUSED = [
    {"type": "message_start", "message": {
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
        "content": [], "stop_reason": None, "usage": {"input_tokens": 5, "output_tokens": 1}}},
    {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    {"type": "content_block_delta", "index": 0,
     "delta": {"type": "text_delta", "text": "Searching."}},
    {"type": "content_block_stop", "index": 0},
    {"type": "content_block_start", "index": 1, "content_block": {
        "type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {}}},
    {"type": "content_block_stop", "index": 1},
    {"type": "message_delta", "delta": {"stop_reason": "pause_turn"},
     "usage": {"output_tokens": 9}},
    {"type": "message_stop"},
]


def test_anthropic_pause_turn_is_a_typed_end_not_an_answer() -> None:
    """5.3 ``pause_turn``: the API paused a long server-tool turn; the paused content
    (here a ``server_tool_use`` with no result) is no answer and cannot be replayed
    before a user message. It was committed as the answer, finish ``other``."""
    parser = AnthropicStreamParser()
    for frame in PAUSED:
        parser.feed(events((str(frame["type"]), frame))[0])
    with pytest.raises(FatalProviderError, match="pause_turn") as caught:
        parser.finish()
    assert caught.value.code == "pause_turn"
    assert not caught.value.retryable


def test_anthropic_pause_turn_body_is_a_typed_end() -> None:
    """5.3, the non-streaming body."""
    with pytest.raises(FatalProviderError, match="pause_turn"):
        parse_response_body({"id": "msg_1", "type": "message", "role": "assistant",
                             "model": "claude-sonnet-4-5", "stop_reason": "pause_turn",
                             "content": [{"type": "text", "text": "Searching."}],
                             "usage": {"input_tokens": 5, "output_tokens": 9}})


def test_chat_text_closed_by_done_without_a_finish_reason_completes() -> None:
    """3.4 (lead): a server that ends plain text with ``[DONE]`` and no ``finish_reason``
    said it was done; the answer completes, its finish unknown, rather than failing a turn
    some OpenAI-compatible servers would fail every time."""
    parser = ChatCompletionsStreamParser("openai-compatible")
    for event in events(_chunk({"role": "assistant", "content": ""}),
                        _chunk({"content": "The answer is 4."}), ("", "[DONE]")):
        parser.feed(event)
    response = parser.finish()
    assert response.finish_reason is None
    assert [part.text for part in response.parts if isinstance(part, TextPart)] == [
        "The answer is 4."]
