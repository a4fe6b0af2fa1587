"""What a served turn costs the server, by count (issue 26): system calls, locks and route
matches per turn that the stream does without."""

from __future__ import annotations

import asyncio
import collections
import json
import socket
import uuid
from typing import Any

import pytest
from aiohttp.test_utils import make_mocked_request
from hypothesis import example, given
from hypothesis import strategies as st
from prometheus_client import Gauge

from tests.server.support import Api, turn_body
from turnstate.server import _app, _sse
from turnstate.server._metrics import Metrics
from turnstate.server._sse import TurnStream, logged_frame, logged_frames
from turnstate.storage._turn_log import (
    LogBatch,
    LoggedEvent,
    log_batch,
    logged_event,
    turn_log_of,
)

USER_TIMEOUT = getattr(socket, "TCP_USER_TIMEOUT", None)


class Socket:
    """A socket that records its options."""

    def __init__(self) -> None:
        self.options: list[tuple[int, int, int]] = []

    def setsockopt(self, level: int, name: int, value: int) -> None:
        self.options.append((level, name, value))

    def fileno(self) -> int:
        return 3


class Transport:
    def __init__(self, sockname: Any) -> None:
        self.extra = {"sockname": sockname, "socket": Socket()}

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self.extra.get(name, default)

    def is_closing(self) -> bool:
        return False


def stream_on(sockname: Any, heartbeat: float, timeout: float = 120.0,
              ) -> tuple[TurnStream, Socket]:
    transport = Transport(sockname)
    request = make_mocked_request("POST", "/", transport=transport)
    sock = transport.extra["socket"]
    assert isinstance(sock, Socket)
    return TurnStream(request, headers={}, heartbeat_seconds=heartbeat,
                      send_timeout=timeout), sock


@pytest.mark.skipif(USER_TIMEOUT is None, reason="no TCP_USER_TIMEOUT here")
async def test_the_kernel_timeout_is_set_when_the_heartbeat_first_comes_due() -> None:
    """None on open (a turn shorter than the heartbeat never sets it), the send timeout
    at the first due heartbeat, once, and the kernel default back on close."""
    stream, sock = stream_on(("127.0.0.1", 8080), heartbeat=10)
    await stream.open()
    assert sock.options == []
    stream._ping_due()  # the heartbeat's timer, come due
    stream._ping_due()
    assert sock.options == [(socket.IPPROTO_TCP, USER_TIMEOUT, 120_000)]
    stream.close()
    assert sock.options[-1] == (socket.IPPROTO_TCP, USER_TIMEOUT, 0)


@pytest.mark.skipif(USER_TIMEOUT is None, reason="no TCP_USER_TIMEOUT here")
async def test_a_heartbeat_longer_than_the_send_timeout_sets_it_on_open() -> None:
    stream, sock = stream_on(("::1", 8080, 0, 0), heartbeat=300, timeout=120)
    await stream.open()
    assert sock.options == [(socket.IPPROTO_TCP, USER_TIMEOUT, 120_000)]
    stream.close()


async def test_a_unix_socket_gets_no_tcp_option() -> None:
    stream, sock = stream_on("/run/turnstate.sock", heartbeat=10)
    await stream.open()
    stream._ping_due()
    stream.close()
    assert sock.options == []


async def test_a_short_turn_sets_no_socket_option(api: Api, monkeypatch: pytest.MonkeyPatch,
                                                  ) -> None:
    """Two ``setsockopt`` calls per turn before issue 26's fourth pass, none now."""
    calls: list[object] = []
    original = _sse.TurnStream._limit_unacknowledged

    def counted(self: TurnStream) -> None:
        calls.append(self)
        original(self)

    monkeypatch.setattr(_sse.TurnStream, "_limit_unacknowledged", counted)
    chat_id = await api.new_chat()
    assert (await api.turn(chat_id))[-1].event == "turn_completed"
    assert calls == []


async def test_the_open_streams_gauge_takes_no_lock_per_stream(
        api: Api, monkeypatch: pytest.MonkeyPatch) -> None:
    """The gauge reads the open streams when scraped (a stream costs no ``inc``/``dec``),
    and counts a stream while it is open."""

    def refuse(self: Gauge, amount: float = 1) -> None:
        raise AssertionError("a locked gauge update per stream")

    monkeypatch.setattr(Gauge, "inc", refuse)
    monkeypatch.setattr(Gauge, "dec", refuse)
    chat_id = await api.new_chat()
    assert (await api.turn(chat_id))[-1].event == "turn_completed"
    registry = api.services.metrics.registry
    assert registry.get_sample_value("turnstate_sse_streams_active") == 0
    api.services.turn_tasks.add(asyncio.ensure_future(asyncio.sleep(0)))
    assert registry.get_sample_value("turnstate_sse_streams_active") == 1
    text = await (await api.client.get("/metrics")).text()
    assert "turnstate_sse_streams_active 1.0" in text
    await asyncio.gather(*api.services.turn_tasks)
    api.services.turn_tasks.clear()


async def test_the_turn_route_is_matched_first(api: Api, monkeypatch: pytest.MonkeyPatch,
                                               ) -> None:
    """aiohttp tries the routes under /api/chats in the order added, one regular
    expression each: the turn's is the first tried (the fourth before)."""
    tried: list[str] = []
    for resource in api.client.app.router.resources():
        original = getattr(resource, "_match", None)
        if original is None:  # a static folder: matched by prefix, not tried here
            continue

        def match(path: str, original: Any = original, name: str = resource.canonical,
                  ) -> Any:
            tried.append(name)
            return original(path)

        monkeypatch.setattr(resource, "_match", match)
    chat_id = await api.new_chat()
    tried.clear()
    response = await api.call("POST", f"/api/chats/{chat_id}/turns", "alice",
                              json=turn_body())
    await response.read()
    assert tried == ["/api/chats/{chat_id}/turns"]


async def test_a_turn_is_counted_after_its_final_event_is_sent(
        api: Api, monkeypatch: pytest.MonkeyPatch) -> None:
    """The metrics and the log line of a finished turn wait until the stream has sent
    the final event: they are not on the turn's latency path."""
    order: list[str] = []
    finish, counted = _sse.TurnStream.finish, Metrics.turn_finished

    async def finishing(self: TurnStream, data: bytes) -> None:
        order.append("final event sent")
        await finish(self, data)

    def counting(self: Metrics, *args: Any) -> None:
        order.append("turn counted")
        counted(self, *args)

    monkeypatch.setattr(_sse.TurnStream, "finish", finishing)
    monkeypatch.setattr(Metrics, "turn_finished", counting)
    chat_id = await api.new_chat()
    assert (await api.turn(chat_id))[-1].event == "turn_completed"
    await api.services.engine.detached.settled()
    assert order == ["final event sent", "turn counted"]
    text = await (await api.client.get("/metrics")).text()
    assert "turnstate_turn_seconds_count 1.0" in text


async def test_a_turn_id_is_drawn_without_a_uuid_object(
        api: Api, monkeypatch: pytest.MonkeyPatch) -> None:
    """The turn's id is the engine's ``new_turn_id`` (a version-4 UUID's 32 hex digits,
    without building the ``UUID`` object)."""
    def refuse() -> uuid.UUID:
        raise AssertionError("uuid.uuid4() called")

    chat_id = await api.new_chat()  # the store's chat ids are still uuid4's
    monkeypatch.setattr(uuid, "uuid4", refuse)
    response = await api.call("POST", f"/api/chats/{chat_id}/turns", "alice",
                              json=turn_body())
    await response.read()
    turn_id = response.headers["X-Turn-Id"]
    assert len(turn_id) == 32 and turn_id[12] == "4" and turn_id[16] in "89ab"


def test_a_plain_turn_shares_the_default_settings(api: Api) -> None:
    """No ``settings`` and compaction on (most turns): shared frozen defaults (the
    engine's settings, the server's trimming context), not two new records per turn;
    anything else as asked."""
    from turnstate.core._context import OverflowPolicy
    from turnstate.core._generation import NO_SETTINGS
    from turnstate.server._turns import TRIMMED, turn_input

    plain = turn_input(turn_body(), api.services, "alice")
    assert plain.settings is NO_SETTINGS and plain.context is TRIMMED
    assert plain.context.overflow is OverflowPolicy.TRIM
    other = turn_input({**turn_body(), "compaction": False, "settings": {"seed": 3}},
                       api.services, "alice")
    assert other.context.provider_compaction_enabled is False
    assert other.context.overflow is OverflowPolicy.TRIM
    assert other.settings.seed == 3


async def test_a_connection_gone_before_the_heartbeat_gets_no_option() -> None:
    """The timer may come due after the peer left (the handler's cancel not yet run): a
    closing transport or a closed socket is left alone, and a failing ``setsockopt``
    does not escape the timer's callback."""
    stream, sock = stream_on(("127.0.0.1", 8080), heartbeat=10)
    await stream.open()
    closing = stream._request.transport
    closing.is_closing = lambda: True  # type: ignore[union-attr]
    stream._ping_due()
    assert sock.options == []
    stream.close()

    stream, sock = stream_on(("127.0.0.1", 8080), heartbeat=10)
    await stream.open()

    def gone(level: int, name: int, value: int) -> None:
        raise OSError(9, "Bad file descriptor")

    sock.setsockopt = gone  # type: ignore[method-assign]
    stream._ping_due()  # no OSError out of the timer's callback
    assert stream._socket is None
    stream.close()


_any_data = st.text(st.characters(blacklist_categories=()), max_size=12).map(
    lambda text: json.dumps({"text": text}, ensure_ascii=False))  # lone surrogates too


@given(st.lists(st.tuples(st.text(max_size=8), _any_data), min_size=1, max_size=6))
@example([("text_delta", '{"text":"\ud83d"}'), ("text_delta", '{"text":"é"}')])
def test_a_batch_is_framed_as_its_events_frames_joined(events: list[tuple[str, str]]) -> None:
    """``logged_frames`` encodes a batch's text once (issue 26) and writes what the
    frames of its events, one by one, write: half a surrogate pair escaped included."""
    batch = [LoggedEvent(index, kind, data) for index, (kind, data) in enumerate(events, 1)]
    assert logged_frames(batch) == b"".join(map(logged_frame, batch))


async def test_a_turn_stream_carries_the_api_headers_and_the_prepare_hook_skips_it(
        api: Api) -> None:
    """A turn's stream is built with what the prepare hook gives ``/api`` answers (its
    own ``no-cache`` kept), so the hook leaves it alone (issue 26: three header writes a
    turn fewer); a served turn's answer carries them as before."""
    stream = TurnStream(make_mocked_request("POST", "/api/chats/c/turns"), headers={},
                        heartbeat_seconds=10)
    before = dict(stream.headers)
    await _app._page_headers(stream._request, stream)
    assert dict(stream.headers) == before
    assert (before["Server"], before["X-Content-Type-Options"], before["Cache-Control"]) == (
        "turnstate", "nosniff", "no-cache")
    chat_id = await api.new_chat()
    response = await api.call("POST", f"/api/chats/{chat_id}/turns", json=turn_body())
    await response.read()
    assert (response.headers["Server"], response.headers["X-Content-Type-Options"],
            response.headers["Cache-Control"]) == ("turnstate", "nosniff", "no-cache")


async def test_streams_share_one_timer_for_their_first_heartbeat(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Streams of one server queue their first heartbeat in its ``FirstPings``: one timer
    for all of them, none of their own (issue 26: a timer armed and cancelled per turn
    before); a due stream gets its ping from it, a closed one is let go, not pinged."""
    loop = asyncio.get_running_loop()
    armed: list[float] = []
    call_at = loop.call_at

    def counted(when: float, *args: Any, **kwargs: Any) -> asyncio.TimerHandle:
        armed.append(when)
        return call_at(when, *args, **kwargs)

    monkeypatch.setattr(loop, "call_at", counted)
    pings = _sse.FirstPings(10)
    streams = [TurnStream(make_mocked_request("POST", "/"), headers={}, heartbeat_seconds=10,
                          first_pings=pings) for _ in range(3)]
    for stream in streams:
        await stream.open()
    assert len(armed) == 1 and armed[0] == pytest.approx(streams[0]._last_write + 10)
    assert all(stream._ping_timer is None for stream in streams)
    closed, idle, recent = streams
    closed.close()
    assert pings.queue[0][1] == [None]  # the queue holds no closed stream
    idle._last_write = recent._last_write = loop.time() - 10  # the period has passed
    pings.queue = collections.deque((loop.time(), ticket) for _, ticket in pings.queue)
    pings._fire()  # the head's timer, come due
    assert closed._ping is None and idle._ping is not None and recent._ping is not None
    assert not pings.queue and pings.timer is None
    for stream in streams:
        stream.close()


async def test_the_first_pings_timer_fires_at_most_ten_times_a_period() -> None:
    """After a firing, the next one waits at least a tenth of the period, even when the
    next stream is due sooner: a ping at most that late."""
    loop = asyncio.get_running_loop()
    pings = _sse.FirstPings(10)
    streams = [TurnStream(make_mocked_request("POST", "/"), headers={}, heartbeat_seconds=10,
                          first_pings=pings) for _ in range(2)]
    for stream in streams:
        await stream.open()
    first, second = pings.queue[0][0], pings.queue[1][0]
    streams[0]._last_write = loop.time() - 10
    pings.queue[0] = (loop.time() - 1, pings.queue[0][1])
    pings._fire()
    assert pings.timer is not None
    assert pings.timer.when() >= max(second, loop.time() + 1) - 1e-6 >= first - 1e-6
    for stream in streams:
        stream.close()
    pings.timer.cancel()


async def test_a_served_turn_numbers_and_logs_its_events_without_attrs_init(
        api: Api, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each event of a turn is a ``LoggedEvent`` and each log write a ``LogBatch`` per
    turn: made by their slot makers (attrs' frozen ``__init__``, a few thousand
    instructions each, nine events a cursor turn), and equal to the attrs-built ones."""
    assert logged_event(3, "text_delta", '{"t":1}') == LoggedEvent(3, "text_delta", '{"t":1}')
    events = (LoggedEvent(1, "turn_completed", "{}"),)
    assert log_batch("t", events, True) == LogBatch("t", events, True)

    def refuse(self: object, *args: object, **kwargs: object) -> None:
        raise AssertionError(f"attrs' __init__ of {type(self).__name__} called")

    chat_id = await api.new_chat()
    monkeypatch.setattr(LoggedEvent, "__init__", refuse)
    monkeypatch.setattr(LogBatch, "__init__", refuse)
    assert (await api.turn(chat_id))[-1].event == "turn_completed"
    await api.services.engine.detached.settled()  # its log written
    (turn,) = await api.services.store.list_turns(chat_id)
    assert (await turn_log_of(api.services.store).read(chat_id, turn.id)).events[-1].final
