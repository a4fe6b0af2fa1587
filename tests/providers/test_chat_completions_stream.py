"""Chat Completions stream parsing, body parsing and error classification."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from tests.conftest import DATA_DIR
from tests.helpers import chunk_events
from turnstate.core._conversation import ReasoningPart, TextPart, ToolCallPart, Usage
from turnstate.core._errors import (
    FatalProviderError,
    ProviderProtocolError,
    RateLimited,
    TransientProviderError,
)
from turnstate.providers._protocol import ReasoningDelta, SseEvent, TextDelta
from turnstate.providers.chat_completions import (
    ChatCompletionsAdapter,
    ChatCompletionsStreamParser,
    parse_response_body,
)

DATA = DATA_DIR / "chat-completions"


def parse(path: Path) -> tuple[ChatCompletionsStreamParser, list[object]]:
    parser = ChatCompletionsAdapter().stream_parser()
    deltas: list[object] = []
    for event in chunk_events(path, event_key=None):
        deltas.extend(parser.feed(event))
    return parser, deltas


def event(payload: object) -> SseEvent:
    return SseEvent(data=payload if isinstance(payload, str) else json.dumps(payload))


def chunk(delta: dict[str, object] | None = None, finish: str | None = None,
          usage: dict[str, object] | None = None, choices: bool = True) -> SseEvent:
    body: dict[str, object] = {"id": "c1", "object": "chat.completion.chunk", "model": "m",
                               "usage": usage}
    body["choices"] = [{"index": 0, "delta": delta or {}, "finish_reason": finish}] \
        if choices else []
    return event(body)


def test_recorded_openai_text_stream(recorded_dir: Path) -> None:
    """The recorded OpenAI text stream yields its text, id, finish reason and usage."""
    parser, deltas = parse(recorded_dir / "chat-completions" / "openai-text.chunks.txt")
    assert parser.done
    response = parser.finish()
    assert response.response_id == "chatcmpl-D8Z5oo6uDh67AD85p73ksdT1KxhE0"
    (text,) = response.parts
    assert isinstance(text, TextPart)
    assert text.text.startswith("**Holiday Name:** Harmony Day\n\n")
    assert text.text.endswith("mutual respect.")
    assert len(text.text) == 1724
    assert len(deltas) == 300 and all(isinstance(d, TextDelta) for d in deltas)
    assert "".join(d.text for d in deltas if isinstance(d, TextDelta)) == text.text
    assert response.finish_reason == "stop"
    assert response.usage == Usage(input_tokens=16, output_tokens=300)


def test_recorded_xai_tool_call_stream(recorded_dir: Path) -> None:
    """The recorded xAI stream yields reasoning_content, one tool call and usage details."""
    parser, deltas = parse(recorded_dir / "chat-completions" / "xai-tool-call.chunks.txt")
    response = parser.finish()
    reasoning, call = response.parts
    assert isinstance(reasoning, ReasoningPart) and reasoning.kind == "reasoning_content"
    assert reasoning.text.startswith("First, the user is asking about the weather")
    assert len(reasoning.text) == 1069
    assert reasoning.provider == "openai-compatible" and reasoning.model == "grok-3-mini"
    assert len(deltas) == 227 and all(isinstance(d, ReasoningDelta) for d in deltas)
    assert call == ToolCallPart(call_id="call_79382389", name="weather",
                                arguments='{"location":"San Francisco"}',
                                provider="openai-compatible", model="grok-3-mini")
    assert response.finish_reason == "tool_calls"
    # xAI counts reasoning beside completion_tokens (total 560 = 307 + 26 + 227): output.
    assert response.usage == Usage(input_tokens=307, output_tokens=26 + 227,
                                   cached_input_tokens=306, reasoning_tokens=227)


def test_recorded_openai_text_body(recorded_dir: Path) -> None:
    """The recorded non-streaming OpenAI body yields its text and usage."""
    body = json.loads((recorded_dir / "chat-completions" / "openai-text.json").read_text())
    response = parse_response_body(body)
    assert response.response_id == "chatcmpl-D8Z5f52zQqikDBEKQMQoYcWMcWPeU"
    (text,) = response.parts
    assert isinstance(text, TextPart) and text.text.startswith("**Holiday Name:** Galaxy Day")
    assert len(text.text) == 1842
    assert response.finish_reason == "stop"
    assert response.usage == Usage(input_tokens=16, output_tokens=363)


def test_recorded_xai_tool_call_body(recorded_dir: Path) -> None:
    """The recorded non-streaming xAI body yields reasoning, the call and cached tokens."""
    body = json.loads((recorded_dir / "chat-completions" / "xai-tool-call.json").read_text())
    response = parse_response_body(body)
    reasoning, call = response.parts
    assert isinstance(reasoning, ReasoningPart) and len(reasoning.text) == 1194
    assert isinstance(call, ToolCallPart)
    assert (call.call_id, call.name, call.arguments) == (
        "call_46427107", "weather", '{"location":"San Francisco"}')
    assert response.usage == Usage(input_tokens=307, output_tokens=26 + 255,
                                   cached_input_tokens=244, reasoning_tokens=255)


def test_parallel_tool_calls_accumulate_by_index() -> None:
    """Interleaved fragments of two calls are joined per index, in index order."""
    parser, deltas = parse(DATA / "parallel-tool-calls.chunks.txt")
    response = parser.finish()
    assert deltas == []
    assert [(c.call_id, c.name, c.arguments) for c in response.tool_calls] == [
        ("call_paris", "weather", '{"city": "Paris"}'),
        ("call_rome", "weather", '{"city": "Rome"}'),
    ]
    assert response.parts == response.tool_calls
    assert response.finish_reason == "tool_calls"
    assert response.usage == Usage(input_tokens=82, output_tokens=40, cached_input_tokens=64)
    assert response.tool_calls[0].model == "gpt-4o-mini-2024-07-18"


def test_done_marker_completes_a_stream_without_usage() -> None:
    """A server that sends no usage completes the stream with ``[DONE]``."""
    parser, deltas = parse(DATA / "text-done-no-usage.chunks.txt")
    assert [d.text for d in deltas if isinstance(d, TextDelta)] == ["Hello", " there."]
    response = parser.finish()
    assert response.parts == (TextPart(text="Hello there."),)
    assert response.finish_reason == "length"
    assert response.usage == Usage()


def test_completion_needs_finish_reason_and_usage_or_done() -> None:
    """Complete = ``[DONE]``, or a finish_reason and a usage in either order; else not."""
    parser = ChatCompletionsStreamParser("openai-compatible")
    parser.feed(chunk({"content": "hi"}))
    assert not parser.done
    parser.feed(chunk({}, finish="stop"))
    assert not parser.done
    with pytest.raises(ProviderProtocolError, match="finish_reason but no usage"):
        parser.finish()
    parser.feed(chunk(usage={"prompt_tokens": 3, "completion_tokens": 1}, choices=False))
    assert parser.done
    assert parser.finish().usage == Usage(input_tokens=3, output_tokens=1)

    usage_first = ChatCompletionsStreamParser("openai-compatible")
    usage_first.feed(chunk({"content": "x"}, usage={"prompt_tokens": 1}))
    assert not usage_first.done
    usage_first.feed(chunk({}, finish="stop"))
    assert usage_first.done

    bare_done = ChatCompletionsStreamParser("openai-compatible")
    bare_done.feed(event("[DONE]"))  # no finish_reason, no call: complete, finish unknown
    assert bare_done.done and bare_done.finish().finish_reason is None
    done = ChatCompletionsStreamParser("openai-compatible")
    done.feed(chunk({}, finish="stop"))
    done.feed(event("[DONE]"))
    assert done.done and done.finish().parts == ()


def test_cut_stream_is_a_protocol_error(recorded_dir: Path) -> None:
    """The recorded stream cut before its usage chunk, or earlier, cannot finish."""
    events = chunk_events(recorded_dir / "chat-completions" / "openai-text.chunks.txt",
                          event_key=None)
    for cut in (0, 10, len(events) - 1):
        parser = ChatCompletionsStreamParser("openai-compatible")
        for item in events[:cut]:
            parser.feed(item)
        assert not parser.done
        with pytest.raises(ProviderProtocolError):
            parser.finish()


def test_events_after_done_are_ignored() -> None:
    """Nothing after ``[DONE]`` changes the response."""
    parser = ChatCompletionsStreamParser("openai-compatible")
    parser.feed(chunk({"content": "a"}, finish="stop"))
    parser.feed(event("[DONE]"))
    assert parser.feed(chunk({"content": "b"})) == ()
    assert parser.finish().parts == (TextPart(text="a"),)


def test_other_choices_and_unknown_fields_are_ignored() -> None:
    """Only choice 0 counts; unknown keys and empty chunks change nothing."""
    parser = ChatCompletionsStreamParser("openai-compatible")
    parser.feed(event({"id": "c", "choices": [{"index": 1, "delta": {"content": "no"}}]}))
    parser.feed(event({"id": "c", "surprise": {"x": 1}, "choices": [
        {"index": 0, "delta": {"content": "yes", "audio": None}}]}))
    parser.feed(event({"object": "keepalive"}))
    parser.feed(chunk({}, finish="stop"))
    parser.feed(event("[DONE]"))
    assert parser.finish().parts == (TextPart(text="yes"),)


def test_reused_index_with_a_new_id_is_a_new_call() -> None:
    """A server that puts parallel calls on index 0 still yields two calls."""
    parser = ChatCompletionsStreamParser("openai-compatible")
    for call_id, city in (("call_1", "Oslo"), ("call_2", "Rome")):
        parser.feed(chunk({"tool_calls": [{"index": 0, "id": call_id, "type": "function",
                                           "function": {"name": "weather",
                                                        "arguments": f'{{"city":"{city}"}}'}}]}))
    parser.feed(chunk({}, finish="stop"))
    parser.feed(event("[DONE]"))
    calls = parser.finish().tool_calls
    assert [(c.call_id, c.arguments) for c in calls] == [
        ("call_1", '{"city":"Oslo"}'), ("call_2", '{"city":"Rome"}')]


def test_call_without_name_is_a_protocol_error() -> None:
    """A tool call whose fragments never named its function cannot be answered (a
    missing id gets a synthetic one: test_wire_fidelity)."""
    parser = ChatCompletionsStreamParser("openai-compatible")
    parser.feed(chunk({"tool_calls": [{"index": 0, "function": {"arguments": "{}"}}]}))
    parser.feed(chunk({}, finish="stop"))
    parser.feed(event("[DONE]"))
    with pytest.raises(ProviderProtocolError, match="has no name"):
        parser.finish()


def test_empty_arguments_become_an_empty_object() -> None:
    """A call streamed with no argument text carries ``{}``."""
    parser = ChatCompletionsStreamParser("openai-compatible")
    parser.feed(chunk({"tool_calls": [{"index": 0, "id": "c", "function": {"name": "now"}}]}))
    parser.feed(chunk({}, finish="stop"))
    parser.feed(event("[DONE]"))
    assert parser.finish().tool_calls[0].arguments == "{}"


@pytest.mark.parametrize("data", ["{not json", "[1, 2]", '"text"'])
def test_malformed_frame_is_a_protocol_error(data: str) -> None:
    """A frame that is not a JSON object breaks the wire format."""
    with pytest.raises(ProviderProtocolError):
        ChatCompletionsStreamParser("openai-compatible").feed(SseEvent(data=data))


def test_in_stream_server_error_is_transient() -> None:
    """An error object after HTTP 200 (after some text) is classified as transient."""
    parser = ChatCompletionsStreamParser("openai-compatible")
    events = chunk_events(DATA / "in-stream-error.chunks.txt", event_key=None)
    assert parser.feed(events[0]) == [TextDelta(text="Par")]
    with pytest.raises(TransientProviderError, match="server had an error") as caught:
        parser.feed(events[1])
    assert caught.value.status is None


@pytest.mark.parametrize(("error", "kind"), [
    ({"message": "slow down", "code": "rate_limit_exceeded"}, RateLimited),
    ({"message": "overloaded", "type": "overloaded_error"}, TransientProviderError),
    ({"message": "bad", "type": "invalid_request_error"}, FatalProviderError),
])
def test_in_stream_errors_by_code(error: dict[str, str], kind: type[Exception]) -> None:
    """In-stream errors are classified by their code or type."""
    with pytest.raises(kind):
        ChatCompletionsStreamParser("openai-compatible").feed(event({"error": error}))
    if kind is FatalProviderError:
        with pytest.raises(FatalProviderError) as caught:
            ChatCompletionsStreamParser("openai-compatible").feed(event({"error": error}))
        assert not caught.value.retryable


def test_tool_call_body_with_two_calls() -> None:
    """A non-streaming body with two calls and null content yields both calls only."""
    response = parse_response_body(json.loads((DATA / "tool-call.json").read_text()))
    assert [(c.call_id, c.name, c.arguments) for c in response.parts] == [  # type: ignore[union-attr]
        ("call_a", "weather", '{"city":"Oslo"}'), ("call_b", "time", "{}")]
    assert response.usage == Usage(input_tokens=374, output_tokens=60)


def test_error_body_and_choiceless_body() -> None:
    """An error body raises its classified error; a body without a message is malformed."""
    with pytest.raises(TransientProviderError):
        parse_response_body(json.loads((DATA / "error-server.json").read_text()))
    with pytest.raises(ProviderProtocolError):
        parse_response_body({"id": "x", "choices": []})


# --- error classification ---------------------------------------------------------------


def classify(status: int, name: str, headers: dict[str, str] | None = None) -> Exception:
    body = (DATA / name).read_bytes()
    return ChatCompletionsAdapter(api_key="sk-secret").classify_error(status, headers or {}, body)


@pytest.mark.parametrize("name", ["error-unanswered-tool-call.json", "error-orphan-tool.json"])
def test_tool_pairing_400_is_fatal_and_logged_as_a_bug(
    name: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Tool-pairing 400s are fatal and logged at ERROR on ``turnstate`` as bugs."""
    with caplog.at_level(logging.ERROR, logger="turnstate"):
        error = classify(400, name)
    assert type(error) is FatalProviderError
    assert error.status == 400 and error.code == "invalid_request_error"
    assert "tool" in error.detail
    (record,) = [r for r in caplog.records if r.name == "turnstate"]
    assert record.levelno == logging.ERROR and "[provider][bug]" in record.getMessage()


def test_other_400_is_fatal_without_a_bug_log(caplog: pytest.LogCaptureFixture) -> None:
    """A 400 that is not turnstate's fault is fatal but not logged as a bug."""
    body = b'{"error":{"message":"Invalid model","type":"invalid_request_error","code":null}}'
    with caplog.at_level(logging.ERROR, logger="turnstate"):
        error = ChatCompletionsAdapter().classify_error(400, {}, body)
    assert type(error) is FatalProviderError
    assert caplog.records == []


def test_rate_limit_honours_retry_after() -> None:
    """A 429 is RateLimited with the server's Retry-After and its code."""
    error = classify(429, "error-rate-limit.json", {"Retry-After": "7"})
    assert isinstance(error, RateLimited)
    assert error.retry_after == 7.0 and error.code == "rate_limit_exceeded" and error.retryable


@pytest.mark.parametrize("status", [500, 502, 503, 504])
def test_5xx_is_transient(status: int) -> None:
    """Server errors are transient; the detail is the provider's message, not the key."""
    error = classify(status, "error-server.json")
    assert type(error) is TransientProviderError and error.status == status
    assert "sk-secret" not in str(error)


def test_non_json_error_body_keeps_its_text() -> None:
    """A proxy's HTML error page is classified by status and quoted briefly."""
    error = ChatCompletionsAdapter().classify_error(502, {}, b"<html>Bad Gateway</html>")
    assert isinstance(error, TransientProviderError) and "Bad Gateway" in error.detail


@pytest.mark.parametrize("status", [401, 403, 404, 422])
def test_client_errors_are_fatal(status: int) -> None:
    """Authentication, permission and validation failures are fatal."""
    error = ChatCompletionsAdapter().classify_error(
        status, {}, b'{"error":{"message":"nope","type":"invalid_request_error"}}')
    assert type(error) is FatalProviderError and error.status == status


def test_every_recorded_file_parses(recorded_dir: Path) -> None:
    """Every recorded Chat Completions stream completes and every body parses."""
    folder = recorded_dir / "chat-completions"
    streams, bodies = sorted(folder.glob("*.chunks.txt")), sorted(folder.glob("*.json"))
    assert streams and bodies
    for path in streams:
        parser, _ = parse(path)
        assert parser.done, path.name
        assert parser.finish().parts, path.name
    for path in bodies:
        assert parse_response_body(json.loads(path.read_text())).parts, path.name
