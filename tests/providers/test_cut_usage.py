"""What a request cut before its response billed (money, 2026-12-04): the Anthropic
parser's ``billed()`` over recorded streams, and ``provider_batches``' ``cuts``, one
entry per attempt the provider answered whose stream was cut on this side."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from contextlib import aclosing, nullcontext
from pathlib import Path

import pytest

from tests.helpers import chunk_events
from turnstate.core._conversation import Usage
from turnstate.core._errors import ProviderError, TransientProviderError
from turnstate.providers._boundary import provider_batches
from turnstate.providers._protocol import ErrorClassifier, HttpRequest, ProviderResponse, SseEvent
from turnstate.providers.anthropic import AnthropicAdapter, AnthropicStreamParser
from turnstate.providers.openai_responses import OpenAIResponsesAdapter

DATA = Path(__file__).resolve().parents[1] / "data" / "anthropic"


def fed(parser: AnthropicStreamParser, events: list[SseEvent]) -> AnthropicStreamParser:
    for event in events:
        parser.feed(event)
    return parser


def test_nothing_is_billed_before_message_start() -> None:
    assert AnthropicStreamParser().billed() is None


def test_a_recorded_stream_cut_after_its_text_bills_the_start_counts(
    recorded_dir: Path,
) -> None:
    """``anthropic-text``: ``message_start`` says 12 input tokens and 1 output token;
    cut before ``message_delta`` the output is what streamed, estimated."""
    events = chunk_events(recorded_dir / "anthropic" / "anthropic-text.chunks.txt")
    cut = next(i for i, e in enumerate(events) if e.event == "message_delta")
    billed = fed(AnthropicStreamParser(), events[:cut]).billed()
    assert billed is not None
    whole = fed(AnthropicStreamParser(), events).finish()
    text = "".join(getattr(p, "text", "") for p in whole.parts)
    assert billed == Usage(input_tokens=12, output_tokens=-(-len(text) // 4))
    assert 1 < billed.output_tokens <= whole.usage.output_tokens


def test_cache_reads_and_writes_of_message_start_are_billed_exactly() -> None:
    events = chunk_events(DATA / "usage-null-in-delta.chunks.txt")
    parser = fed(AnthropicStreamParser(), events[:1])
    assert events[0].event == "message_start"
    assert parser.billed() == Usage(input_tokens=210 + 1800 + 5200, output_tokens=1,
                                    cached_input_tokens=5200, cache_write_tokens=1800)


def test_a_count_larger_than_the_estimate_wins() -> None:
    """A ``message_delta`` count (cumulative) above the streamed estimate is the figure."""
    parser = AnthropicStreamParser()
    parser.feed(SseEvent(event="message_start", data='{"type":"message_start","message":'
                         '{"id":"m","usage":{"input_tokens":50,"output_tokens":1}}}'))
    parser.feed(SseEvent(event="message_delta", data='{"type":"message_delta","delta":{},'
                         '"usage":{"output_tokens":400}}'))
    assert parser.billed() == Usage(input_tokens=50, output_tokens=400)


class Scripted:
    """A transport that sends ``frames``, then fails with ``failure`` (if any)."""

    def __init__(self, frames: list[SseEvent], failure: ProviderError | None = None) -> None:
        self.frames, self.failure = frames, failure

    async def stream(self, request: HttpRequest, classify: ErrorClassifier
                     ) -> AsyncGenerator[SseEvent, None]:
        for frame in self.frames:
            yield frame
        if self.failure is not None:
            raise self.failure

    async def before_restart(self, restarts: int, error: ProviderError) -> bool:
        return False


START = SseEvent(event="message_start", data='{"type":"message_start","message":'
                 '{"id":"m","usage":{"input_tokens":900,"cache_read_input_tokens":100,'
                 '"output_tokens":1}}}')
TEXT = [SseEvent(event="content_block_start", data='{"type":"content_block_start",'
                 '"index":0,"content_block":{"type":"text","text":""}}'),
        SseEvent(event="content_block_delta", data='{"type":"content_block_delta",'
                 '"index":0,"delta":{"type":"text_delta","text":"' + "word " * 40 + '"}}')]
BILLED = Usage(input_tokens=1000, output_tokens=50, cached_input_tokens=100)
LOST = TransientProviderError("anthropic", "connection lost")


async def cuts_of(transport: Scripted, adapter: object = None, *,
                  leave_after: int | None = None) -> list[Usage | None]:
    adapter = adapter or AnthropicAdapter(api_key="k")
    request = HttpRequest(method="POST", url="http://x", headers={}, body=b"{}")
    cuts: list[Usage | None] = []
    seen = 0
    with pytest.raises(ProviderError) if leave_after is None else nullcontext():
        async with aclosing(provider_batches(transport, adapter, request,  # type: ignore[arg-type]
                                             cuts)) as stream:
            async for item in stream:
                assert not isinstance(item, ProviderResponse)
                seen += 1
                if leave_after is not None and seen >= leave_after:
                    break
    return cuts




async def test_a_connection_lost_mid_answer_is_a_cut_with_what_the_stream_said() -> None:
    assert await cuts_of(Scripted([START, *TEXT], LOST)) == [BILLED]


async def test_a_stream_the_consumer_leaves_is_a_cut() -> None:
    assert await cuts_of(Scripted([START, *TEXT, *TEXT]), leave_after=1) == [BILLED]


async def test_a_stream_that_ends_without_its_terminal_event_is_a_cut() -> None:
    assert await cuts_of(Scripted([START, *TEXT])) == [BILLED]


async def test_a_provider_that_said_nothing_is_a_cut_of_unknown_figures() -> None:
    created = SseEvent(event="response.created", data='{"type":"response.created",'
                       '"response":{"id":"resp_1","status":"in_progress","usage":null}}')
    text = SseEvent(event="response.output_text.delta", data='{"type":'
                    '"response.output_text.delta","output_index":0,"delta":"Hi"}')
    adapter = OpenAIResponsesAdapter(api_key="k")
    assert await cuts_of(Scripted([created, text], LOST), adapter) == [None]


async def test_no_answer_and_an_error_event_are_not_cuts() -> None:
    """A failure before any event was never answered; an error event is the provider's
    own failure of the request (counted as not billed)."""
    assert await cuts_of(Scripted([], LOST)) == []
    error = SseEvent(event="error", data='{"type":"error","error":{"type":'
                     '"overloaded_error","message":"Overloaded"}}')
    assert await cuts_of(Scripted([START, *TEXT, error])) == []


class Batched(Scripted):
    """Sends every frame in one batch (``stream_batches``), as one network chunk (the
    class that reads in batches defines ``stream`` too, or it is read one by one)."""

    async def stream(self, request: HttpRequest, classify: ErrorClassifier
                     ) -> AsyncGenerator[SseEvent, None]:
        for frame in self.frames:
            yield frame

    async def stream_batches(self, request: HttpRequest, classify: ErrorClassifier
                             ) -> AsyncGenerator[list[SseEvent], bool | None]:
        yield list(self.frames)


async def test_a_whole_response_the_consumer_never_took_bills_its_own_usage() -> None:
    """Closed at the batch that held ``message_stop``: the request was answered whole,
    and its final usage (20 output tokens, not the estimate of 50) is what it billed."""
    end = [SseEvent(event="message_delta", data='{"type":"message_delta","delta":'
                    '{"stop_reason":"end_turn"},"usage":{"output_tokens":20}}'),
           SseEvent(event="message_stop", data='{"type":"message_stop"}')]
    cuts = await cuts_of(Batched([START, *TEXT, *end]), leave_after=1)
    assert cuts == [Usage(input_tokens=1000, output_tokens=20, cached_input_tokens=100)]
