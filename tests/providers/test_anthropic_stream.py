"""Anthropic Messages stream and body parsing, stop reasons, usage and error classification."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import DATA_DIR
from tests.helpers import chunk_events
from turnstate.core._conversation import OpaquePart, ReasoningPart, TextPart, ToolCallPart, Usage
from turnstate.core._errors import (
    ContextLengthExceeded,
    FatalProviderError,
    ProviderProtocolError,
    RateLimited,
    TransientProviderError,
)
from turnstate.providers._protocol import ProviderResponse, ReasoningDelta, SseEvent, TextDelta
from turnstate.providers.anthropic import (
    AnthropicAdapter,
    AnthropicStreamParser,
    parse_response_body,
)

DATA = DATA_DIR / "anthropic"


def parse(path: Path) -> tuple[ProviderResponse, list[object]]:
    parser = AnthropicAdapter().stream_parser()
    deltas: list[object] = []
    for event in chunk_events(path):
        deltas.extend(parser.feed(event))
    assert parser.done
    return parser.finish(), deltas


def frame(payload: dict[str, Any]) -> SseEvent:
    return SseEvent(data=json.dumps(payload), event=str(payload.get("type", "message")))


def test_recorded_text_stream(recorded_dir: Path) -> None:
    """The recorded text stream yields its text, id, stop reason and last usage."""
    response, deltas = parse(recorded_dir / "anthropic" / "anthropic-text.chunks.txt")
    assert response.response_id == "msg_01QC4g3HwBThD4BaNtBckFDJ"
    assert response.parts == (TextPart(
        text="Hello! I'm doing well, thank you for asking. How are you doing today? "
             "Is there anything I can help you with?"),)
    assert len(deltas) == 6 and all(isinstance(d, TextDelta) for d in deltas)
    assert response.finish_reason == "stop"
    assert response.usage == Usage(input_tokens=12, output_tokens=30)


def test_recorded_thinking_stream(recorded_dir: Path) -> None:
    """The recorded thinking stream keeps the thinking text and its signature verbatim."""
    response, deltas = parse(recorded_dir / "anthropic" / "anthropic-clear-thinking.1.chunks.txt")
    thinking, text = response.parts
    assert isinstance(thinking, ReasoningPart)
    assert thinking.kind == "thinking" and thinking.provider == "anthropic"
    assert thinking.model == "claude-sonnet-4-5-20250929"
    assert thinking.text == "The previous result was 925. Now I need to divide that by 5.\n\n" \
                            "925 ÷ 5 = 185"
    assert thinking.signature is not None
    assert thinking.signature.startswith("EvQBCkYICxgCKkAxhD4N")
    assert thinking.signature.endswith("Ca17BgB") and len(thinking.signature) == 332
    assert text == TextPart(text="925 ÷ 5 = 185")
    assert [type(d) for d in deltas] == [ReasoningDelta] * 9 + [TextDelta] * 3
    assert response.usage == Usage(input_tokens=69, output_tokens=53)


def test_recorded_json_tool_stream(recorded_dir: Path) -> None:
    """The recorded tool_use stream joins the input_json_delta partials (the first is "")."""
    response, deltas = parse(recorded_dir / "anthropic" / "anthropic-json-tool.1.chunks.txt")
    (call,) = response.parts
    assert call == ToolCallPart(
        call_id="toolu_01KFbKqPYSuAKujiL6mTfzYA", name="json",
        arguments='{"elements": [{"location": "San Francisco", "temperature": 58, '
                  '"condition": "sunny"}]}',
        provider="anthropic", model="claude-haiku-4-5-20251001")
    assert deltas == []
    assert response.finish_reason == "tool_calls"
    assert response.usage == Usage(input_tokens=849, output_tokens=47)


def test_recorded_refusal_stream(recorded_dir: Path) -> None:
    """The recorded refusal has no content, stop reason ``refusal`` and its details."""
    response, _ = parse(recorded_dir / "anthropic" / "anthropic-refusal.chunks.txt")
    assert response.parts == ()
    assert response.finish_reason == "refusal"
    assert response.metadata["stopDetails"]["category"] == "cyber"
    assert response.usage == Usage(input_tokens=18, output_tokens=5)


def test_recorded_text_body(recorded_dir: Path) -> None:
    """The recorded non-streaming text body."""
    body = json.loads((recorded_dir / "anthropic" / "anthropic-text.json").read_text())
    response = parse_response_body(body)
    assert response.response_id == "msg_01VdEjxAP5ahtHKrrRdNBteQ"
    assert response.parts[0].text.startswith("Hello! I'm doing well, thanks")  # type: ignore[union-attr]
    assert response.usage == Usage(input_tokens=12, output_tokens=29)


def test_recorded_tool_body(recorded_dir: Path) -> None:
    """The recorded non-streaming tool_use body: the input object becomes JSON text."""
    body = json.loads((recorded_dir / "anthropic" / "anthropic-json-tool.1.json").read_text())
    response = parse_response_body(body)
    (call,) = response.tool_calls
    assert call.call_id == "toolu_01Q9ExVZnzZj7E2QQYHYtNUa" and call.name == "json"
    assert json.loads(call.arguments)["elements"][3] == {
        "location": "Berlin", "temperature": -9, "condition": "snowy"}
    assert response.finish_reason == "tool_calls"
    assert response.usage == Usage(input_tokens=1151, output_tokens=87)


def test_thinking_text_and_two_tool_uses() -> None:
    """Thinking, text, a streamed input and an empty input ({}), with cumulative usage."""
    response, deltas = parse(DATA / "thinking-tool.chunks.txt")
    thinking, text, weather, clock = response.parts
    assert thinking == ReasoningPart(provider="anthropic", model="claude-sonnet-4-6",
                                     kind="thinking", text="I should check the weather.",
                                     signature="Eq4CsigA==")
    assert text == TextPart(text="I'll check.")
    assert (weather.call_id, weather.arguments) == ("toolu_017R", '{"city": "Paris"}')  # type: ignore[union-attr]
    assert (clock.name, clock.arguments) == ("get_time", "{}")  # type: ignore[union-attr]
    assert [type(d) for d in deltas] == [ReasoningDelta, ReasoningDelta, TextDelta]
    # Cumulative: the last message_delta's values win, nothing is added up; input counts
    # uncached + cache writes + cache reads.
    assert response.usage == Usage(input_tokens=2699, output_tokens=59, cached_input_tokens=2000,
                                   reasoning_tokens=18, cache_write_tokens=100)


def test_redacted_thinking_keeps_its_data() -> None:
    """A redacted_thinking block arrives whole and keeps its opaque data."""
    response, _ = parse(DATA / "redacted-thinking.chunks.txt")
    redacted, text = response.parts
    assert isinstance(redacted, ReasoningPart) and redacted.kind == "redacted_thinking"
    assert redacted.data == "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP"
    assert text == TextPart(text="Done.")
    assert response.finish_reason == "length"


def test_thinking_body() -> None:
    """The non-streaming thinking + tool_use body from the wire reference."""
    response = parse_response_body(json.loads((DATA / "thinking-tool.json").read_text()))
    thinking, call = response.parts
    assert isinstance(thinking, ReasoningPart) and thinking.signature == "Eq4CjsonSig"
    assert isinstance(call, ToolCallPart) and call.arguments == "{}"
    assert response.usage.reasoning_tokens == 18


def test_overloaded_error_after_200_is_transient() -> None:
    """An ``error`` event mid-stream (overloaded_error) raises a transient error."""
    parser = AnthropicStreamParser()
    events = chunk_events(DATA / "overloaded-in-stream.chunks.txt")
    parser.feed(events[0])
    parser.feed(events[1])
    with pytest.raises(TransientProviderError, match="Overloaded") as caught:
        parser.feed(events[2])
    assert caught.value.code == "overloaded_error" and caught.value.status is None


@pytest.mark.parametrize(("kind", "error"), [
    ("rate_limit_error", RateLimited), ("api_error", TransientProviderError),
    ("timeout_error", TransientProviderError), ("invalid_request_error", FatalProviderError),
    ("permission_error", FatalProviderError)])
def test_stream_errors_by_type(kind: str, error: type[Exception]) -> None:
    """In-stream errors are classified by ``error.type``."""
    with pytest.raises(error) as caught:
        AnthropicStreamParser().feed(frame({"type": "error",
                                            "error": {"type": kind, "message": "m"}}))
    assert type(caught.value) is error


@pytest.mark.parametrize(("reason", "expected"), [
    ("end_turn", "stop"), ("stop_sequence", "stop"), ("tool_use", "tool_calls"),
    ("max_tokens", "length"), ("refusal", "refusal")])
def test_stop_reason_mapping(reason: str, expected: str) -> None:
    """Stop reasons map to the normalised finish reasons (others pass through)."""
    parser = AnthropicStreamParser()
    parser.feed(frame({"type": "message_start", "message": {"id": "m", "model": "x",
                                                            "usage": {"input_tokens": 1}}}))
    parser.feed(frame({"type": "message_delta", "delta": {"stop_reason": reason},
                       "usage": {"output_tokens": 2}}))
    parser.feed(frame({"type": "message_stop"}))
    assert parser.finish().finish_reason == expected


def test_stream_without_message_stop_is_a_protocol_error() -> None:
    """Ending before ``message_stop`` means the stream was cut."""
    parser = AnthropicStreamParser()
    for item in chunk_events(DATA / "thinking-tool.chunks.txt")[:-1]:
        parser.feed(item)
    assert not parser.done
    with pytest.raises(ProviderProtocolError, match="message_stop"):
        parser.finish()


def test_bad_tool_input_is_a_protocol_error() -> None:
    """Partial JSON that does not join into an object breaks the wire format."""
    parser = AnthropicStreamParser()
    parser.feed(frame({"type": "content_block_start", "index": 0, "content_block": {
        "type": "tool_use", "id": "t", "name": "n", "input": {}}}))
    parser.feed(frame({"type": "content_block_delta", "index": 0, "delta": {
        "type": "input_json_delta", "partial_json": '{"a": '}}))
    parser.feed(frame({"type": "content_block_stop", "index": 0}))
    parser.feed(frame({"type": "message_stop"}))
    with pytest.raises(ProviderProtocolError, match="not JSON"):
        parser.finish()


def test_unknown_events_are_ignored_and_unknown_blocks_kept_opaque() -> None:
    """Unknown event types and stray deltas change nothing; an unknown block is kept."""
    parser = AnthropicStreamParser()
    parser.feed(frame({"type": "brand_new_event", "x": 1}))
    parser.feed(frame({"type": "content_block_start", "index": 0, "content_block": {
        "type": "server_tool_use", "id": "s"}}))
    parser.feed(frame({"type": "content_block_delta", "index": 7, "delta": {
        "type": "text_delta", "text": "lost"}}))
    parser.feed(frame({"type": "ping"}))
    parser.feed(frame({"type": "message_stop"}))
    assert parser.finish().parts == (OpaquePart(provider="anthropic", model="",
                                                kind="server_tool_use",
                                                raw='{"type":"server_tool_use","id":"s"}'),)


def test_malformed_frame_is_a_protocol_error() -> None:
    """A frame whose data is not a JSON object fails cleanly."""
    with pytest.raises(ProviderProtocolError):
        AnthropicStreamParser().feed(SseEvent(data="{broken", event="content_block_delta"))


def test_error_body_raises_and_non_message_is_malformed() -> None:
    """An error body raises its classified error; anything else non-message is malformed."""
    with pytest.raises(TransientProviderError):
        parse_response_body(json.loads((DATA / "error-overloaded.json").read_text()))
    with pytest.raises(ProviderProtocolError):
        parse_response_body({"type": "completion"})


# --- error classification ---------------------------------------------------------------


def classify(status: int, name: str, headers: dict[str, str] | None = None) -> Exception:
    return AnthropicAdapter(api_key="sk-ant-secret").classify_error(
        status, headers or {}, (DATA / name).read_bytes())


def test_rate_limit_with_retry_after() -> None:
    """429 rate_limit_error is RateLimited with Retry-After."""
    error = classify(429, "error-rate-limit.json", {"retry-after": "12"})
    assert isinstance(error, RateLimited)
    assert error.retry_after == 12.0 and error.code == "rate_limit_error"


@pytest.mark.parametrize("status", [529, 500, 504])
def test_overloaded_and_server_errors_are_transient(status: int) -> None:
    """529 overloaded_error, 500 and 504 are transient."""
    error = classify(status, "error-overloaded.json")
    assert type(error) is TransientProviderError and error.status == status
    assert "sk-ant-secret" not in str(error)


@pytest.mark.parametrize("name", [
    "error-unanswered-tool-use.json", "error-unexpected-tool-use-id.json",
    "error-thinking-signature.json", "error-thinking-dropped.json"])
def test_tool_pairing_and_thinking_400s_are_logged_bugs(
    name: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Pairing and thinking-block 400s are fatal and logged at ERROR as bugs."""
    with caplog.at_level(logging.ERROR, logger="turnstate"):
        error = classify(400, name)
    assert type(error) is FatalProviderError and error.code == "invalid_request_error"
    assert len(caplog.records) == 1 and "[provider][bug] anthropic" in caplog.records[0].message


def test_other_400_is_fatal_without_a_bug_log(caplog: pytest.LogCaptureFixture) -> None:
    """A prompt that is too long is fatal, and not turnstate's bug: the typed
    ``ContextLengthExceeded`` with the provider's figures (the engine trims by them)."""
    with caplog.at_level(logging.ERROR, logger="turnstate"):
        error = classify(400, "error-prompt-too-long.json")
    assert isinstance(error, ContextLengthExceeded) and caplog.records == []
    assert (error.input_tokens, error.context_limit) == (210_000, 200_000)


@pytest.mark.parametrize(("status", "kind"), [
    (401, "authentication_error"), (403, "permission_error"), (404, "not_found_error"),
    (413, "request_too_large")])
def test_client_errors_are_fatal(status: int, kind: str) -> None:
    """401, 403, 404 and 413 are fatal, carrying the error type as their code."""
    body = json.dumps({"type": "error", "error": {"type": kind, "message": "no"}}).encode()
    error = AnthropicAdapter().classify_error(status, {}, body)
    assert type(error) is FatalProviderError and error.code == kind and error.status == status


def test_every_recorded_file_parses(recorded_dir: Path) -> None:
    """Every recorded Anthropic stream reaches message_stop; every body parses."""
    folder = recorded_dir / "anthropic"
    streams, bodies = sorted(folder.glob("*.chunks.txt")), sorted(folder.glob("*.json"))
    assert streams and bodies
    for path in streams:
        response, _ = parse(path)
        assert response.finish_reason in {"stop", "tool_calls", "refusal"}, path.name
    for path in bodies:
        assert parse_response_body(json.loads(path.read_text())).parts, path.name
