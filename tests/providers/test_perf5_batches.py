"""A network chunk's frames parsed in one call (``FrameDispatcher.feed_many``, issue 26,
helper perf5): the same events, state, stop and typed errors as ``feed`` frame by frame,
and ``provider_batches`` hands a batch over in one call."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.strategies import responses_delta_streams
from turnstate.providers._boundary import provider_batches
from turnstate.providers._protocol import (
    ErrorClassifier,
    HttpRequest,
    ProviderEvent,
    ProviderResponse,
    SseEvent,
)
from turnstate.providers.gemini_interactions._parser import InteractionsStreamParser
from turnstate.providers.openai_responses import OpenAIResponsesAdapter
from turnstate.providers.openai_responses._parser import ResponsesStreamParser

END = SseEvent(event="response.completed", data=json.dumps(
    {"type": "response.completed", "response": {"id": "resp_1", "output": []}}))


def _state(parser: ResponsesStreamParser) -> Any:
    return {index: (state.item, state.text, state.arguments, state.reasoning, state.done)
            for index, state in parser._items.items()}


def one_by_one(events: list[SseEvent]) -> list[Any]:
    """Each frame fed alone until done or a failure: what ``provider_batches`` did."""
    parser = ResponsesStreamParser()
    out: list[Any] = []
    failure = None
    for event in events:
        try:
            out.extend(parser.feed(event))
        except Exception as exc:  # compared: type and text
            failure = (type(exc), str(exc))
            break
        if parser.done:
            break
    return [out, failure, _state(parser), parser.done]


def batched(events: list[SseEvent], cuts: list[int]) -> list[Any]:
    """The same frames cut into batches at ``cuts``, each batch in one call."""
    parser = ResponsesStreamParser()
    out: list[ProviderEvent] = []
    failure = None
    bounds = [0, *sorted(cut % (len(events) + 1) for cut in cuts), len(events)]
    for start, end in itertools.pairwise(bounds):
        try:
            parser.feed_many(events[start:end], out)
        except Exception as exc:  # compared: type and text
            failure = (type(exc), str(exc))
            break
        if parser.done:
            break
    return [out, failure, _state(parser), parser.done]


@settings(max_examples=400)
@given(frames=responses_delta_streams(), cuts=st.lists(st.integers(0, 20), max_size=4),
       ended=st.booleans())
def test_a_batch_gives_what_its_frames_give_one_by_one(
        frames: list[tuple[str, str]], cuts: list[int], ended: bool) -> None:
    events = [SseEvent(data=data, event=name or "message") for name, data in frames]
    if ended:  # frames after the terminal one are left unread either way
        events = [*events[:2], END, *events[2:]]
    assert batched(events, cuts) == one_by_one(events)


def test_the_generic_batch_stops_at_the_terminal_frame() -> None:
    """``FrameDispatcher.feed_many`` (the Interactions parser's) feeds frame by frame
    until done: a frame after the terminal one is not read."""
    parser = InteractionsStreamParser()
    junk = SseEvent(event="message", data="not json")
    done = {"event_type": "interaction.completed",
            "interaction": {"id": "v1_1", "status": "completed"}}
    out: list[ProviderEvent] = []
    parser.feed_many([SseEvent(event="message", data=json.dumps(done)), junk], out)
    assert parser.done and out == []
    with pytest.raises(Exception, match="malformed"):
        InteractionsStreamParser().feed_many([junk], out)


class OneBatch:
    """A transport that hands a whole stream over as one batch."""

    FINISHES_ON_SEND = True

    def __init__(self, events: list[SseEvent]) -> None:
        self.events = events

    async def stream(self, request: HttpRequest, classify: ErrorClassifier) -> Any:
        for event in self.events:
            yield event

    async def stream_batches(self, request: HttpRequest, classify: ErrorClassifier) -> Any:
        yield list(self.events)

    async def before_restart(self, restarts: int, error: Exception) -> bool:
        return False


async def test_a_batch_of_text_deltas_costs_no_call_per_frame(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``provider_batches`` called the parser's ``feed`` for every frame, and ``feed``
    its fast handler for every delta: a text delta now takes neither."""
    fed: list[str] = []
    feed = ResponsesStreamParser.feed

    def counted(self: ResponsesStreamParser, event: SseEvent) -> Any:
        fed.append(event.event)
        return feed(self, event)

    monkeypatch.setattr(ResponsesStreamParser, "feed", counted)
    added = {"type": "response.output_item.added", "output_index": 0,
             "item": {"type": "message", "id": "msg_1"}}
    deltas = [{"type": "response.output_text.delta", "output_index": 0, "item_id": "msg_1",
               "delta": piece} for piece in ("Hel", "lo")]
    events = [SseEvent(event=frame["type"], data=json.dumps(frame))
              for frame in (added, *deltas)] + [END]
    adapter = OpenAIResponsesAdapter(api_key="sk-test")
    request = HttpRequest(method="POST", url="http://x/v1/responses", headers={}, body=b"{}")
    items = [item async for item in provider_batches(OneBatch(events), adapter, request)]
    assert [[delta.text for delta in items[0]]] == [["Hel", "lo"]]  # type: ignore[union-attr]
    assert isinstance(items[-1], ProviderResponse)
    assert fed == ["response.output_item.added", "response.completed"]
