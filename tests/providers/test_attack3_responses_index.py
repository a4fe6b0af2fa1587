"""OpenAI Responses: a frame whose ``output_index`` is missing, not an integer, or names
no item opened belongs to the item its ``item_id`` names, else the last item (attack3).

The parser opened a new item for every such frame. A relay that drops the index from
its deltas (or writes it as ``0.0``) made each text delta a message of its own (the
answer's text repeated in the response's parts), each argument delta a nameless call
(run as ``unknown tool ''`` and sent back with an empty call id), and the terminal
output's copy of a call a second call: a tool with side effects ran twice. A
``function_call`` that still has no name is a protocol error, as in Chat Completions.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import pytest

from tests.helpers import chunk_events
from turnstate.core._errors import ProviderProtocolError
from turnstate.providers import OpenAIResponsesAdapter, ProviderResponse, SseEvent

DATA = Path(__file__).resolve().parents[1] / "data" / "openai-responses"
ADAPTER = OpenAIResponsesAdapter(base_url="http://127.0.0.1:1/v1", api_key="k")
STREAMS = ("text", "parallel-calls", "reasoning-summary", "call-without-item-done")
OPENS = ("response.output_item.added",)


def _dropped(frame: dict[str, Any]) -> None:
    if frame.get("type") not in OPENS:
        frame.pop("output_index", None)


def _floated(frame: dict[str, Any]) -> None:
    if isinstance(frame.get("output_index"), int):
        frame["output_index"] = float(frame["output_index"])


def _dropped_everywhere(frame: dict[str, Any]) -> None:
    frame.pop("output_index", None)


def _moved(frame: dict[str, Any]) -> None:
    """Deltas at an index no item was opened at (their ``item_id`` still names it)."""
    if str(frame.get("type", "")).endswith(".delta") and "item_id" in frame:
        frame["output_index"] = 7 + frame.get("output_index", 0)


MUTATIONS: dict[str, Callable[[dict[str, Any]], None]] = {
    "index-dropped-from-deltas": _dropped, "index-a-float": _floated,
    "index-dropped-everywhere": _dropped_everywhere, "index-never-opened": _moved,
}


def _mutated(events: list[SseEvent], change: Callable[[dict[str, Any]], None]) -> list[SseEvent]:
    out = []
    for event in events:
        frame = json.loads(event.data)
        change(frame)
        out.append(attrs.evolve(event, data=json.dumps(frame)))
    return out


def _finished(events: list[SseEvent]) -> ProviderResponse:
    parser = ADAPTER.stream_parser()
    for event in events:
        parser.feed(event)
    return parser.finish()


@pytest.mark.parametrize("mutation", sorted(MUTATIONS))
@pytest.mark.parametrize("stream", STREAMS)
def test_frames_without_a_usable_index_build_the_same_response(stream: str,
                                                               mutation: str) -> None:
    events = chunk_events(DATA / f"{stream}.chunks.txt")
    expected = _finished(events)
    got = _finished(_mutated(events, MUTATIONS[mutation]))
    assert got.parts == expected.parts


def test_streamed_text_is_not_repeated_when_the_terminal_output_is_empty() -> None:
    """Without the terminal copy, the streamed deltas alone make one text part."""
    events = chunk_events(DATA / "text.chunks.txt")
    expected = "".join(json.loads(e.data)["delta"] for e in events
                       if e.event == "response.output_text.delta")

    def bare(frame: dict[str, Any]) -> None:
        _dropped(frame)
        if frame.get("type") == "response.completed":
            frame["response"]["output"] = []
        if frame.get("type") in ("response.output_text.done", "response.content_part.done",
                                 "response.output_item.done"):
            frame["type"] = "response.ignored"

    parts = _finished(_mutated(events, bare)).parts
    assert [getattr(p, "text", None) for p in parts] == [expected]


def test_a_function_call_without_a_name_is_a_protocol_error() -> None:
    frames = [
        {"type": "response.created", "response": {"id": "resp_1", "model": "gpt-4o"}},
        {"type": "response.function_call_arguments.delta", "output_index": 0,
         "item_id": "fc_1", "delta": '{"city": "Paris"}'},
        {"type": "response.completed", "response": {"id": "resp_1", "model": "gpt-4o",
                                                    "status": "completed", "output": []}},
    ]
    events = [SseEvent(event=f["type"], data=json.dumps(f)) for f in frames]
    with pytest.raises(ProviderProtocolError, match="has no name"):
        _finished(events)


async def test_a_relay_without_indexes_runs_each_call_once() -> None:
    """The engine over loopback: two calls streamed with float indexes run once each."""
    from tests.engine.support import FakeClock, collect, make_turn, tool
    from tests.faults.hostile import sse_bytes, sse_server
    from tests.faults.rig import quick_transport
    from turnstate.engine import TurnEngine
    from turnstate.storage import MemoryStore

    ran: list[dict[str, Any]] = []

    async def weather(arguments: dict[str, Any]) -> Any:
        ran.append(arguments)
        return "sunny"

    store = MemoryStore(clock=FakeClock())
    chat = await store.create_chat(owner="relay")
    async with (sse_server(
            sse_bytes(_mutated(chunk_events(DATA / "parallel-calls.chunks.txt"), _floated)),
            sse_bytes(chunk_events(DATA / "text.chunks.txt"))) as base,
            quick_transport() as transport):
        adapter = OpenAIResponsesAdapter(base_url=f"{base}/v1", api_key="k")
        engine = TurnEngine(store, {"openai": adapter}, transport, clock=FakeClock())
        outcome = await collect(engine.run_turn(chat.id, make_turn(
            "weather?", provider="openai", model="gpt-4o", tools=(tool("weather", weather),))))
    assert outcome.committed, outcome.final
    assert sorted(a["city"] for a in ran) == ["Oslo", "Paris"], ran
    calls = [e for e in outcome.events if e.type == "tool_call"]
    assert [c.name for c in calls] == ["weather", "weather"] and all(c.call_id for c in calls)


def test_a_frame_looks_at_the_newest_items_only() -> None:
    """A guard on the lookup by ``item_id``: a stream of many items, then as many deltas
    without an index naming no item, costs each delta a bounded look (a scan of every
    item made such a stream quadratic: 8,000 of each took 7 s)."""
    looks = 0

    class Counted(dict):  # type: ignore[type-arg]
        def get(self, key: Any, default: Any = None) -> Any:
            nonlocal looks
            looks += key == "id"
            return super().get(key, default)

    parser = ADAPTER.stream_parser()
    count = 2_000
    for index in range(count):
        parser.feed(SseEvent(event="response.output_item.added", data=json.dumps({
            "type": "response.output_item.added", "output_index": index,
            "item": {"type": "message", "id": f"msg_{index}"}})))
    for state in parser._items.values():  # type: ignore[attr-defined]
        state.item = Counted(state.item)
    for _ in range(count):
        parser.feed(SseEvent(event="response.output_text.delta", data=json.dumps({
            "type": "response.output_text.delta", "item_id": "msg_nowhere", "delta": "x"})))
    assert looks <= 16 * count, looks
