"""How many async generators an event crosses on its way from the transport's SSE
decoding to the consumer of ``run_turn`` (issue 26): each level costs a resumption per
event. The frames on the stack while the decoder runs are counted: every async
generator between the decoder and the consumer is one of them."""

from __future__ import annotations

import inspect
import json
import sys
from collections import Counter
from collections.abc import AsyncGenerator, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from tests.engine.support import collect, make_turn
from turnstate.core._errors import ProviderError
from turnstate.emulators._emulated import EmulatedProviders
from turnstate.engine import TurnEngine, TurnLimits
from turnstate.engine._lifecycle import TurnLife
from turnstate.engine._limits import ResponseBudget
from turnstate.engine._steps import TurnSteps
from turnstate.providers import _boundary, _transport
from turnstate.providers._protocol import ErrorClassifier, HttpRequest, SseEvent
from turnstate.providers._sse import SseDecoder
from turnstate.providers._transport import AiohttpTransport
from turnstate.providers.openai_responses import OpenAIResponsesAdapter
from turnstate.storage import MemoryStore

EXPECTED = ["TurnLife.run", "TurnSteps.call", "provider_batches",
            "AiohttpTransport.stream_batches"]
"""The event path, consumer side first: the lifecycle (its drive loop is in ``run``; it
was a second level, ``TurnLife._drive``, until issue 26's fifth pass), the call step, the
providers' boundary (parser, restarts) and the transport (SSE decoding, retries). The
last two hand over a chunk's events at once: one resumption per chunk, not per event."""


def _generators_above(frame: Any) -> list[str]:
    """The async generators on the stack above ``frame``, outermost first."""
    names: list[str] = []
    while frame is not None:
        if frame.f_code.co_flags & inspect.CO_ASYNC_GENERATOR:
            names.append(frame.f_code.co_qualname)
        frame = frame.f_back
    return names[::-1]


@contextmanager
def decoder_stacks(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[list[str]]]:
    """The async generators on the stack each time the transport's decoder is fed."""
    stacks: list[list[str]] = []

    class Recording(SseDecoder):
        def feed(self, chunk: bytes) -> list[SseEvent]:
            stacks.append(_generators_above(sys._getframe(1)))
            return super().feed(chunk)

    monkeypatch.setattr(_transport, "SseDecoder", Recording)
    yield stacks


async def test_an_event_crosses_four_generators(monkeypatch: pytest.MonkeyPatch) -> None:
    """The transport decodes inside its own retry loop: no per-attempt generator (it
    was a sixth level: ``AiohttpTransport._attempt``)."""
    async with EmulatedProviders() as stack, AiohttpTransport() as transport:
        store = MemoryStore()
        engine = TurnEngine(store, stack.adapters, transport)
        chat = await store.create_chat(owner="path")
        await collect(engine.run_turn(chat.id, make_turn("hello")))
        with decoder_stacks(monkeypatch) as stacks:
            outcome = await collect(engine.run_turn(chat.id, make_turn("again")))
    assert outcome.final.strategy == "cursor"
    assert stacks and all(found == EXPECTED for found in stacks)


class OneChunk:
    """A transport whose answer arrives as one network chunk: ``stream_batches`` hands
    over all its SSE events at once, as ``AiohttpTransport`` does for a chunk."""

    def __init__(self, events: list[SseEvent]) -> None:
        self.events = events

    async def stream(self, request: HttpRequest, classify: ErrorClassifier
                     ) -> AsyncGenerator[SseEvent, None]:
        for event in self.events:
            yield event

    async def stream_batches(self, request: HttpRequest, classify: ErrorClassifier
                             ) -> AsyncGenerator[list[SseEvent], None]:
        yield list(self.events)

    async def before_restart(self, restarts: int, error: ProviderError) -> bool:
        return False


def _responses_stream(deltas: int) -> list[SseEvent]:
    where = {"item_id": "msg_1", "output_index": 0, "content_index": 0}
    item = {"id": "msg_1", "type": "message", "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": "x" * deltas}]}
    frames: list[dict[str, Any]] = [
        {"type": "response.created", "response": {"id": "resp_1", "model": "gpt-4o"}},
        {"type": "response.output_item.added", "output_index": 0,
         "item": {**item, "content": [], "status": "in_progress"}},
        *({"type": "response.output_text.delta", **where, "delta": "x"}
          for _ in range(deltas)),
        {"type": "response.output_item.done", "output_index": 0, "item": item},
        {"type": "response.completed",
         "response": {"id": "resp_1", "model": "gpt-4o", "status": "completed",
                      "output": [item], "usage": {"input_tokens": 5, "output_tokens": 5}}},
    ]
    return [SseEvent(event=f["type"], data=json.dumps(f)) for f in frames]


@contextmanager
def resumptions(*codes: Any) -> Iterator[Counter[str]]:
    """How many times each of these generator functions' frames starts or resumes."""
    counts: Counter[str] = Counter()
    wanted = {code: code.co_qualname for code in codes}

    def profile(frame: Any, event: str, arg: object) -> None:
        if event == "call" and frame.f_code in wanted:
            counts[wanted[frame.f_code]] += 1

    sys.setprofile(profile)
    try:
        yield counts
    finally:
        sys.setprofile(None)


async def _chunk_resumptions(deltas: int) -> Counter[str]:
    store = MemoryStore()
    engine = TurnEngine(store, {"openai": OpenAIResponsesAdapter(api_key="sk-test")},
                        OneChunk(_responses_stream(deltas)))
    chat = await store.create_chat(owner="path")
    with resumptions(_boundary.provider_batches.__code__, TurnSteps.call.__code__,
                     TurnLife.run.__code__) as counts:
        outcome = await collect(engine.run_turn(chat.id, make_turn("hello", model="gpt-4o")))
    assert outcome.final.text == "x" * deltas
    assert len(outcome.of_type("text_delta")) == deltas  # every event, one by one
    return counts


async def test_a_chunk_of_events_resumes_the_boundary_once() -> None:
    """Twenty text deltas in one chunk: the providers' boundary is started, resumed
    once for the chunk and once for the response, whatever the number of events (it
    was resumed once per event)."""
    counts = await _chunk_resumptions(20)
    assert counts["provider_batches"] <= 4


async def test_a_chunk_of_events_resumes_the_call_step_once() -> None:
    """The call step hands a chunk's events to the drive loop (``TurnLife.run``) as one
    list: only the outermost generator yields the events one by one. The call step is
    resumed as often for two deltas as for twenty (it was resumed once per event: 20
    more times)."""
    few, many = await _chunk_resumptions(2), await _chunk_resumptions(20)
    assert many["TurnSteps.call"] == few["TurnSteps.call"] <= 4
    assert many["TurnLife.run"] - few["TurnLife.run"] == 18  # the consumer's resumptions


@contextmanager
def generators_started() -> Iterator[set[str]]:
    """The async generator functions whose frames run (start or resume) meanwhile."""
    names: set[str] = set()

    def profile(frame: Any, event: str, arg: object) -> None:
        if event == "call" and frame.f_code.co_flags & inspect.CO_ASYNC_GENERATOR:
            names.add(frame.f_code.co_qualname)

    sys.setprofile(profile)
    try:
        yield names
    finally:
        sys.setprofile(None)


async def test_a_cursor_turn_runs_no_generator_but_the_event_path() -> None:
    """Validating a cursor and a commit the store finished at once make their steps
    without a generator (issue 26: two generators a turn, each started, resumed,
    closed and finalised): the only ones a cursor turn runs are the event path's."""
    store = MemoryStore()
    engine = TurnEngine(store, {"openai": OpenAIResponsesAdapter(api_key="sk-test")},
                        OneChunk(_responses_stream(3)))
    chat = await store.create_chat(owner="path")
    await collect(engine.run_turn(chat.id, make_turn("hello", model="gpt-4o")))
    with generators_started() as names:
        outcome = await collect(engine.run_turn(chat.id, make_turn("again", model="gpt-4o")))
    assert outcome.final.strategy == "cursor"
    assert [e.type for e in outcome.events] == [
        "state_changed", *["text_delta"] * 3, "state_changed", "context_snapshot",
        "state_changed", "turn_completed"]
    assert names == {"TurnLife.run", "TurnSteps.call", "provider_batches",
                     "OneChunk.stream_batches"}


async def test_a_chunk_s_deltas_are_counted_once_and_cut_at_the_limit(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The response's delta budget is taken once per chunk, not once per delta (issue
    26); a chunk that crosses ``max_output_deltas`` still shows exactly the deltas up to
    it, then the turn aborts naming the limit."""
    counted: list[int] = []
    take = ResponseBudget.take_deltas

    def counting(self: ResponseBudget, count: int) -> int:
        counted.append(count)
        return take(self, count)

    monkeypatch.setattr(ResponseBudget, "take_deltas", counting)
    store = MemoryStore()
    engine = TurnEngine(store, {"openai": OpenAIResponsesAdapter(api_key="sk-test")},
                        OneChunk(_responses_stream(20)),
                        limits=TurnLimits(max_output_deltas=12))
    chat = await store.create_chat(owner="path")
    outcome = await collect(engine.run_turn(chat.id, make_turn("hello", model="gpt-4o")))
    assert counted == [20]
    assert len(outcome.of_type("text_delta")) == 12
    assert outcome.final.type == "turn_aborted" and outcome.final.reason == "provider_failed"
    assert "max_output_deltas" in (outcome.final.detail or "")
