"""An error frame without a type, as relays write it inside a typed stream.

providers-wire.md 1.5: the SDK raises on any SSE ``data`` object that has an ``error``
key (OAI-PY ``_streaming.py``). Gateways in front of ``/v1/responses`` write a failure
after HTTP 200 as a Chat-style ``data: {"error": {...}}`` frame with no ``type`` (LiteLLM
until its PR 40243, OmniRoute issue 13431). The parser dispatched frames by ``type``
only, so it skipped that frame and the call failed later as "the stream ended before
response.completed": a protocol error, fatal, the provider's message and code lost,
and a server error that came before any output never restarted. The Interactions and
Anthropic parsers read such a frame the same way.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import chunk_events
from turnstate.core._errors import FatalProviderError, RateLimited, TransientProviderError
from turnstate.providers import SseEvent
from turnstate.providers.anthropic import AnthropicStreamParser
from turnstate.providers.gemini_interactions import InteractionsStreamParser
from turnstate.providers.openai_responses import ResponsesStreamParser

DATA = Path(__file__).resolve().parents[1] / "data"


def test_an_untyped_error_frame_fails_the_responses_stream_with_its_error() -> None:
    parser = ResponsesStreamParser()
    events = chunk_events(DATA / "openai-responses" / "relay-untyped-error.chunks.txt")
    for event in events[:-1]:
        assert parser.feed(event) == ()
    with pytest.raises(TransientProviderError) as caught:
        parser.feed(events[-1])
    assert caught.value.code == "server_error"
    assert "error while processing your request" in str(caught.value)


@pytest.mark.parametrize(("fields", "error"), [
    ('{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}',
     RateLimited),
    ('{"message":"You exceeded your current quota","type":"insufficient_quota",'
     '"code":"insufficient_quota"}', FatalProviderError),
])
def test_an_untyped_error_frame_is_classified_like_the_error_event(
        fields: str, error: type[Exception]) -> None:
    for name in ("message", "response.failed"):  # unnamed, or under another event's name
        with pytest.raises(error):
            ResponsesStreamParser().feed(SseEvent(data=f'{{"error":{fields}}}', event=name))


def test_an_untyped_error_frame_fails_the_interactions_stream() -> None:
    frame = '{"error":{"message":"Deadline expired before operation could complete.",' \
            '"code":"gateway_timeout"}}'
    with pytest.raises(TransientProviderError):
        InteractionsStreamParser().feed(SseEvent(data=frame, event="message"))


def test_an_untyped_error_frame_fails_the_anthropic_stream() -> None:
    """A gateway's failed ``/v1/messages`` stream (LiteLLM until its PR 41826)."""
    frame = '{"error":{"type":"overloaded_error","message":"Overloaded"}}'
    with pytest.raises(TransientProviderError) as caught:
        AnthropicStreamParser().feed(SseEvent(data=frame, event="message"))
    assert caught.value.code == "overloaded_error"


def test_a_typed_frame_with_an_error_field_is_dispatched_by_its_type() -> None:
    """Only a frame without a type is read as an error by its ``error`` key."""
    frame = ('{"type":"response.in_progress","sequence_number":1,"error":{"message":"x"},'
             '"response":{"id":"resp_t","status":"in_progress","error":null}}')
    parser = ResponsesStreamParser()
    assert parser.feed(SseEvent(data=frame, event="message")) == ()
    assert parser.response_id == "resp_t"
