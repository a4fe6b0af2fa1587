"""SSE frames and the burst writer: one write per step of the handler, the end merged."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import attrs
import pytest

from tests.server.support import Api, parse_sse, turn_body
from turnstate.core._context import context_snapshot
from turnstate.core._event_json import event_json
from turnstate.core._events import (
    ContextSnapshotEvent,
    StateChanged,
    TextDeltaEvent,
    TurnCompleted,
    TurnEvent,
    TurnStats,
)
from turnstate.core._path import PathStep
from turnstate.server import SERVER_REGISTRY
from turnstate.server._sse import EventWriter, sse_frame
from turnstate.server._views import camel_keys

STEP = PathStep(source="validate", trigger="cursor_valid", dest="cursor")
EVENTS: tuple[TurnEvent, ...] = (
    StateChanged(source="validate", trigger="cursor_valid", dest="cursor"),
    TextDeltaEvent(text='line one\nline "two"\r\u2028 ünïcode'),
    ContextSnapshotEvent(snapshot=context_snapshot(
        provider="openai", model="gpt-4o", reported_input_tokens=900, estimated_tokens=800,
        registry=SERVER_REGISTRY)),
    TurnCompleted(turn_id="t", chat_id="c", strategy="cursor", degradation=None,
                  path=(STEP, STEP), text="done", stats=TurnStats(requests=1,
                                                                  request_bytes=321)),
)


@pytest.mark.parametrize("event", EVENTS, ids=lambda e: e.type)
def test_event_json_is_the_camel_cased_attrs_dict_on_one_line(event: TurnEvent) -> None:
    expected = camel_keys(attrs.asdict(event, recurse=True))
    text = event_json(event)
    assert json.loads(text) == expected
    assert "\n" not in text and "\r" not in text
    events, _ = parse_sse(sse_frame(event).decode())
    assert [(e.event, e.data) for e in events] == [(event.type, expected)]


class Recorder:
    """A stand-in response that records each write (and the end of the body)."""

    def __init__(self, *, block: asyncio.Event | None = None) -> None:
        self.writes: list[bytes] = []
        self.eof: bytes | None = None
        self.block = block

    async def write(self, data: bytes) -> None:
        self.writes.append(data)
        if self.block is not None:
            await self.block.wait()

    async def write_eof(self, data: bytes = b"") -> None:
        self.eof = data


def writer_for(response: Recorder) -> EventWriter:
    return EventWriter(response, None)  # type: ignore[arg-type]


async def test_events_of_one_step_go_out_as_one_write() -> None:
    response = Recorder()
    writer = writer_for(response)
    for event in EVENTS[:3]:
        await writer.send(event)  # no suspension in between: one step of the task
    assert response.writes == []
    await asyncio.sleep(0)  # the task yields to the loop: the burst is flushed
    assert response.writes == [b"".join(sse_frame(e) for e in EVENTS[:3])]
    await writer.send(EVENTS[1])
    await writer.drain()
    assert response.writes[1:] == [sse_frame(EVENTS[1])]


async def test_the_final_event_goes_out_with_the_end_of_the_body() -> None:
    response = Recorder()
    writer = writer_for(response)
    await writer.send(EVENTS[0])
    await writer.send(EVENTS[1])
    await writer.finish(EVENTS[3])  # the queued flush had not run: it is folded in
    assert response.writes == []
    assert response.eof == b"".join(sse_frame(e) for e in (EVENTS[0], EVENTS[1], EVENTS[3]))
    assert writer.writes == 1


async def test_a_write_in_progress_holds_the_next_event_back() -> None:
    release = asyncio.Event()
    response = Recorder(block=release)
    writer = writer_for(response)
    await writer.send(EVENTS[0])
    await asyncio.sleep(0)  # the flush starts and blocks (a slow client)
    sending = asyncio.ensure_future(writer.send(EVENTS[1]))
    await asyncio.sleep(0)
    assert not sending.done() and len(response.writes) == 1
    release.set()
    await sending
    await writer.drain()
    assert response.writes == [sse_frame(EVENTS[0]), sse_frame(EVENTS[1])]


async def test_a_failed_write_surfaces_at_the_next_event() -> None:
    class Broken(Recorder):
        async def write(self, data: bytes) -> None:
            raise ConnectionResetError("client gone")

    writer = writer_for(Broken())
    await writer.send(EVENTS[0])
    await asyncio.sleep(0)
    with pytest.raises(ConnectionResetError):
        await writer.send(EVENTS[1])


async def test_a_whole_turn_reads_the_same_through_the_burst_writer(api: Api) -> None:
    """Every engine event arrives, in order, once; the body ends after the final one."""
    chat_id = await api.new_chat()
    response = await api.call("POST", f"/api/chats/{chat_id}/turns",
                              json=turn_body("[[call:clock]] hi", tools=["clock"]))
    raw = await response.read()
    events, _ = parse_sse(raw.decode())
    assert raw.endswith(b"\n\n") and events[-1].event == "turn_completed"
    names: list[Any] = [e.event for e in events]
    assert names.count("turn_completed") == 1 and "tool_result" in names
    assert names.index("tool_call") < names.index("tool_result") < names.index(
        "context_snapshot")


def test_half_of_a_surrogate_pair_travels_escaped_and_joins_back() -> None:
    """A provider split 😀 across two deltas: each frame still encodes, the client joins."""
    halves = [TextDeltaEvent(text="smile \ud83d"), TextDeltaEvent(text="\ude00 ünï")]
    frames = b"".join(sse_frame(event) for event in halves)
    events, _ = parse_sse(frames.decode("ascii"))
    joined = "".join(e.data["text"] for e in events)
    assert joined.encode("utf-16", "surrogatepass").decode("utf-16") == "smile 😀 ünï"
    assert sse_frame(TextDeltaEvent(text="ünï")) == "event: text_delta\ndata: " \
        '{"text":"ünï","type":"text_delta"}\n\n'.encode()  # the common case stays UTF-8
