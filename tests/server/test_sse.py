"""SSE frames and the turn stream: one write per batch of events, the end merged."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import attrs
import pytest
from aiohttp.test_utils import make_mocked_request

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
from turnstate.engine._follow import Following
from turnstate.engine._live import LiveTurn
from turnstate.server import SERVER_REGISTRY
from turnstate.server._resume import _send
from turnstate.server._sse import TurnStream, logged_frame, sse_frame
from turnstate.server._views import camel_keys
from turnstate.storage._turn_log import LoggedEvent

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
    """A stand-in stream that records each write (and the end of the body)."""

    def __init__(self, *, fail: bool = False) -> None:
        self.writes: list[bytes] = []
        self.eof: bytes | None = None
        self.fail = fail

    async def send(self, data: bytes) -> None:
        if self.fail:
            raise ConnectionResetError("client gone")
        self.writes.append(data)

    async def finish(self, data: bytes) -> None:
        self.eof = data


def entries(*events: TurnEvent, first: int = 1) -> tuple[LoggedEvent, ...]:
    return tuple(LoggedEvent(first + i, e.type, event_json(e)) for i, e in enumerate(events))


async def batches_of(*groups: tuple[LoggedEvent, ...]) -> AsyncIterator[tuple[LoggedEvent,
                                                                             ...]]:
    for group in groups:
        yield group


async def test_each_batch_is_one_write_and_the_final_one_ends_the_body() -> None:
    response = Recorder()
    first, second, final = entries(*EVENTS[:3]), entries(EVENTS[1], first=4), \
        entries(EVENTS[3], first=5)
    await _send(response, Following(notice=None, batches=batches_of(first, second, final)))
    assert response.writes == [b"".join(map(logged_frame, first)), logged_frame(second[0])]
    assert response.eof == logged_frame(final[0])


async def test_the_batches_run_to_their_end_after_the_final_one() -> None:
    """Left suspended after the final batch, a turn's batches were closed by the loop's
    async-generator finalizer: a self-pipe wake-up and a task per turn (issue 26)."""
    ended: list[bool] = []

    async def batches() -> AsyncIterator[tuple[LoggedEvent, ...]]:
        yield entries(EVENTS[0])
        yield entries(EVENTS[3], first=2)
        yield entries(EVENTS[1], first=3)  # a stray batch after the final one: not sent
        ended.append(True)  # reached only when the consumer asks past the final batch

    response = Recorder()
    await _send(response, Following(notice=None, batches=batches()))
    assert response.writes == [logged_frame(entries(EVENTS[0])[0])]
    assert response.eof == logged_frame(entries(EVENTS[3], first=2)[0])
    assert ended == [True]


async def test_a_notice_goes_out_with_the_first_batch() -> None:
    response = Recorder()
    final = entries(EVENTS[3], first=9)
    await _send(response, Following(notice="log_truncated", batches=batches_of(final)))
    assert response.writes == []
    assert response.eof is not None and response.eof.startswith(b"event: resume_notice\n")
    assert response.eof.endswith(logged_frame(final[0]))


async def test_a_failed_write_ends_the_stream() -> None:
    with pytest.raises(ConnectionResetError):
        await _send(Recorder(fail=True), Following(
            notice=None, batches=batches_of(entries(EVENTS[0]), entries(EVENTS[3]))))


async def test_a_follower_gets_what_was_published_in_one_step_as_one_batch() -> None:
    live = LiveTurn(chat_id="c", turn_id="t", owner=None, provider="openai", cap_bytes=10**6)
    batches = live.follow_batches(0)
    for event in EVENTS[:3]:
        live.publish(event, event_json(event))
    assert [e.id for e in await anext(batches)] == [1, 2, 3]
    waiting = asyncio.ensure_future(anext(batches))
    await asyncio.sleep(0)
    assert not waiting.done()  # nothing new: the follower waits
    live.publish(EVENTS[1], event_json(EVENTS[1]))
    live.publish(EVENTS[3], event_json(EVENTS[3]))
    assert [e.id for e in await waiting] == [4, 5]
    with pytest.raises(StopAsyncIteration):
        await anext(batches)  # the final event ended it


async def test_the_heartbeat_waits_while_the_stream_writes() -> None:
    """``: ping`` only after ``heartbeat_seconds`` without a write: a due ping finds a
    recent write and waits from it instead (no task); an idle stream gets one."""
    stream = TurnStream(make_mocked_request("POST", "/"), headers={}, heartbeat_seconds=10)
    loop = asyncio.get_running_loop()
    stream._last_write = loop.time() - 1  # written a second ago
    stream._ping_due()
    assert stream._ping is None and stream._ping_timer is not None
    assert stream._ping_timer.when() == pytest.approx(stream._last_write + 10)
    stream._ping_timer.cancel()
    stream._last_write = loop.time() - 10  # idle for the whole period
    stream._ping_due()
    assert stream._ping is not None
    stream.close()


async def test_a_whole_turn_reads_the_same_through_the_stream(api: Api) -> None:
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


async def test_an_http_1_0_client_gets_the_stream_until_the_connection_closes(
        api: Api) -> None:
    """No chunked encoding on HTTP/1.0 (aiohttp forbids it): the body runs to the close."""
    chat_id = await api.new_chat()
    body = json.dumps(turn_body()).encode()
    server = api.client.server
    reader, writer = await asyncio.open_connection(server.host, server.port)
    writer.write(f"POST /api/chats/{chat_id}/turns HTTP/1.0\r\nAuthorization: Bearer "
                 f"alice-token\r\nContent-Type: application/json\r\nContent-Length: "
                 f"{len(body)}\r\n\r\n".encode() + body)
    raw = await reader.read()  # to the server's close
    writer.close()
    head, _, rest = raw.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.0 200") and b"chunked" not in head.lower()
    events, _ = parse_sse(rest.decode())
    assert events[-1].event == "turn_completed"
