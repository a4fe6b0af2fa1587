"""A stream of nothing but tool calls is refused at the first call past
``max_tool_calls`` while it streams (wire10), on every parser that streams calls: it was
bounded by bytes alone (64 MiB) until whole, its calls all held and parsed before the
engine's count refused them. The refusal is this side's cut, so the attempt's bill (what
the parser's ``billed`` says) is kept, as the whole-response refusal keeps it."""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, Callable, Iterator
from typing import Any

import pytest

from turnstate.core._errors import ProviderError, StreamLimitExceeded
from turnstate.emulators._emulated import kind_of
from turnstate.providers._boundary import provider_batches
from turnstate.providers._protocol import ErrorClassifier, HttpRequest, SseEvent

HOSTILE = 100_000
LIMIT = 3


def _responses() -> Iterator[SseEvent]:
    yield _named("response.created", {"type": "response.created", "response": {
        "id": "resp_1", "model": "gpt-5-mini", "status": "in_progress"}})
    for i in range(HOSTILE):
        yield _named("response.output_item.added", {
            "type": "response.output_item.added", "output_index": i, "item": {
                "type": "function_call", "id": f"fc_{i}", "call_id": f"call_{i}",
                "name": "f", "arguments": ""}})
        yield _named("response.function_call_arguments.delta", {
            "type": "response.function_call_arguments.delta", "output_index": i,
            "delta": "{}"})


def _chat() -> Iterator[SseEvent]:
    for i in range(HOSTILE):
        yield SseEvent(data=json.dumps({"id": "r", "model": "m", "choices": [{
            "index": 0, "delta": {"tool_calls": [{
                "index": i, "id": f"c{i}", "type": "function",
                "function": {"name": "f", "arguments": "{}"}}]}}]}))


def _anthropic() -> Iterator[SseEvent]:
    yield _named("message_start", {"type": "message_start", "message": {
        "id": "msg_1", "model": "claude-sonnet-4-5", "content": [],
        "usage": {"input_tokens": 1000, "output_tokens": 1}}})
    for i in range(HOSTILE):
        yield _named("content_block_start", {
            "type": "content_block_start", "index": i, "content_block": {
                "type": "tool_use", "id": f"toolu_{i}", "name": "f", "input": {}}})
        yield _named("content_block_delta", {
            "type": "content_block_delta", "index": i,
            "delta": {"type": "input_json_delta", "partial_json": "{}"}})


def _gemini() -> Iterator[SseEvent]:
    yield _named("interaction.created", {"event_type": "interaction.created", "interaction": {
        "id": "v1_x", "status": "in_progress", "model": "gemini-2.5-flash"}})
    for i in range(HOSTILE):
        yield _named("step.start", {"event_type": "step.start", "index": i, "step": {
            "type": "function_call", "id": f"fc{i}", "name": "f", "arguments": {}}})
        yield _named("step.stop", {"event_type": "step.stop", "index": i})


def _named(name: str, frame: dict[str, Any]) -> SseEvent:
    return SseEvent(data=json.dumps(frame), event=name)


STREAMS: dict[str, Callable[[], Iterator[SseEvent]]] = {
    "openai": _responses, "openai-compatible": _chat, "deepseek": _chat,
    "anthropic": _anthropic, "gemini": _gemini}


class _Counting:
    """A transport yielding a generated stream, counting the events it handed over."""

    def __init__(self, events: Iterator[SseEvent]) -> None:
        self.events, self.sent = events, 0

    async def stream(self, request: HttpRequest, classify: ErrorClassifier
                     ) -> AsyncGenerator[SseEvent, None]:
        for event in self.events:
            self.sent += 1
            yield event

    async def before_restart(self, restarts: int, error: ProviderError) -> bool:
        return False


async def _refusal(provider: str, **options: Any) -> tuple[StreamLimitExceeded, int, list[Any]]:
    adapter = kind_of(provider).adapter(base_url="http://127.0.0.1:9", api_key="k")
    transport = _Counting(STREAMS[provider]())
    request = HttpRequest(method="POST", url="http://127.0.0.1:9/x", headers={}, body=b"{}")
    cuts: list[Any] = []
    with pytest.raises(StreamLimitExceeded) as raised:
        async for _ in provider_batches(transport, adapter, request, cuts, **options):
            pass
    return raised.value, transport.sent, cuts


@pytest.mark.parametrize("provider", sorted(STREAMS))
async def test_a_stream_of_calls_is_refused_at_the_first_call_past_the_limit(
        provider: str) -> None:
    error, sent, cuts = await _refusal(provider, max_tool_calls=LIMIT)
    assert error.limit == "max_tool_calls"
    assert f"more than {LIMIT} tool calls" in str(error)
    assert sent <= 2 * (LIMIT + 1) + 1, sent  # not the 100,000 calls
    assert len(cuts) == 1  # this side cut it: the attempt's bill is kept


async def test_the_cut_keeps_what_the_stream_billed() -> None:
    _, _, cuts = await _refusal("anthropic", max_tool_calls=LIMIT)
    assert cuts[0] is not None and cuts[0].input_tokens == 1000


@pytest.mark.parametrize("provider", sorted(STREAMS))
def test_a_repeated_start_of_the_same_call_counts_once(provider: str) -> None:
    parser = kind_of(provider).adapter(base_url="http://127.0.0.1:9", api_key="k").stream_parser()
    counter = parser.call_limit  # type: ignore[attr-defined]
    counter.limit = 1
    events = STREAMS[provider]()
    chat = provider in ("openai-compatible", "deepseek")
    head = [] if chat else [next(events)]
    first = [next(events)] if chat else [next(events), next(events)]
    for event in [*head, *first, *first]:  # the first call's frames twice
        parser.feed(event)
    assert counter.begun == 1


async def test_the_engine_refuses_a_stream_of_calls_as_it_streams_and_keeps_its_bill(
        ) -> None:
    from tests.engine.support import FakeClock, collect, make_turn, tool
    from tests.faults.hostile import sse_server
    from tests.faults.rig import quick_transport
    from turnstate.engine import TurnEngine, TurnLimits
    from turnstate.storage import MemoryStore

    frames = _anthropic()
    body = b"".join(f"event: {e.event}\ndata: {e.data}\n\n".encode()
                    for e in (next(frames) for _ in range(1 + 2 * 50)))  # no message_stop
    store = MemoryStore(clock=FakeClock())
    chat = await store.create_chat(owner="bill")
    async with sse_server(body) as base_url, quick_transport() as transport:
        adapter = kind_of("anthropic").adapter(base_url=base_url, api_key="k")
        engine = TurnEngine(store, {"anthropic": adapter}, transport, clock=FakeClock(),
                            limits=TurnLimits(max_tool_calls=LIMIT))
        outcome = await collect(engine.run_turn(chat.id, make_turn(
            "hi", provider="anthropic", model="claude-sonnet-4-5", tools=(tool("f"),))))
    final = outcome.final
    assert final.type == "turn_aborted" and final.reason == "provider_failed"
    assert "more than 3 tool calls streamed" in (final.detail or "")  # not "ended before"
    assert final.stats.usage.input_tokens == 1000
