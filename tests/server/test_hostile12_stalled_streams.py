"""A turn's stream to a client that reads nothing holds a bounded part of its answer
(hostile12).

A stream sent each batch of events as one write: a resume from 0 of a finished turn
(its whole log, up to the 8 MiB cap) or what a live turn published while a slow
reader's last write waited went whole into the socket's buffer, where it stayed as long
as the client read nothing (up to the send timeout, 120 s, or for ever at a trickle). 64
such resumes of a turn with a 3.5 MB log (one token's streams) took a ``serve`` process
from 51 to 329 MiB. A batch now goes out in slices of at most ``SLICE_CHARS`` of event
data, each made into frames once the one before was written.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest

from tests.server.support import Api, parse_sse
from turnstate.server import ServerConfig
from turnstate.server._sse import SLICE_CHARS, TurnStream, slices
from turnstate.storage._turn_log import LoggedEvent

WORDS = 20_000
"""Words of the long answer: about 20,000 events, some 700 KB of log."""


@pytest.fixture
def config() -> ServerConfig:
    return ServerConfig(max_body_bytes=64 * 1024, max_content_bytes=256 * 1024,
                        max_text_chars=2 * WORDS + 20)


async def _long_turn(api: Api) -> tuple[str, str, str]:
    """A finished turn of ``WORDS`` one-word deltas: its chat, id and whole stream."""
    chat = await api.new_chat()
    response = await api.call("POST", f"/api/chats/{chat}/turns", json={
        "provider": "openai", "model": "gpt-4o", "text": "[[say:" + "a_" * WORDS + "]]"})
    text = await response.text()
    assert response.status == 200 and "turn_completed" in text
    return chat, response.headers["X-Turn-Id"], text


@asynccontextmanager
async def _unread(api: Api, path: str) -> AsyncIterator[socket.socket]:
    """A connection that asks for ``path`` and reads nothing (a small receive buffer:
    the rest waits in the server)."""
    server = api.client.server
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.setblocking(False)
    await asyncio.get_running_loop().sock_connect(sock, (server.host, server.port))
    request = f"GET {path} HTTP/1.1\r\nHost: x\r\n{_auth(api)}\r\n\r\n"
    await asyncio.get_running_loop().sock_sendall(sock, request.encode())
    try:
        yield sock
    finally:
        sock.close()


def _auth(api: Api) -> str:
    (name, value), = api.headers().items()
    return f"{name}: {value}"


async def test_a_resume_that_reads_nothing_holds_a_slice_of_the_log_not_all_of_it(
        api: Api, monkeypatch: pytest.MonkeyPatch) -> None:
    chat, turn, whole = await _long_turn(api)
    assert len(whole) > 10 * SLICE_CHARS
    paused, opened = asyncio.Event(), []
    open_stream = TurnStream.open

    async def open_recorded(self: TurnStream) -> None:
        request = self._request
        opened.append(request.transport)  # its buffer small, as a far client's window keeps it
        request.transport.get_extra_info("socket").setsockopt(
            socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
        pause = request.protocol.pause_writing

        def pause_writing() -> None:  # the transport's buffer is past its high mark
            pause()
            paused.set()

        request.protocol.pause_writing = pause_writing
        await open_stream(self)

    monkeypatch.setattr(TurnStream, "open", open_recorded)
    async with _unread(api, f"/api/chats/{chat}/turns/{turn}/events?after=0"):
        await asyncio.wait_for(paused.wait(), 5)  # its writes wait for the client
        held = opened[0].get_write_buffer_size()
        assert held <= 3 * SLICE_CHARS, held  # was the whole log, some 700 KB
    monkeypatch.setattr(TurnStream, "open", open_stream)
    resumed = await api.call("GET", f"/api/chats/{chat}/turns/{turn}/events?after=0")
    assert await resumed.text() == whole  # a reader that reads gets every event, once
    events, _ = parse_sse(whole)
    assert [int(e.id or 0) for e in events] == list(range(1, len(events) + 1))


def _entry(event_id: int, size: int, final: bool = False) -> LoggedEvent:
    return LoggedEvent(event_id, "turn_completed" if final else "text_delta", "x" * size)


def test_a_batch_is_cut_into_runs_of_whole_events_at_most_a_slice_long() -> None:
    small = tuple(_entry(i, 10) for i in range(1, 4))
    assert list(slices(small)) == [small]  # one write, as before
    batch = (*(_entry(i, SLICE_CHARS // 4) for i in range(1, 11)),
             _entry(11, 3 * SLICE_CHARS), _entry(12, 5, final=True))
    runs = list(slices(batch))
    assert [e for run in runs for e in run] == list(batch)  # every event once, in order
    assert [len(run) for run in runs] == [4, 4, 2, 1, 1]  # an event longer than a slice: alone
    assert all(sum(len(e.data) for e in run) <= SLICE_CHARS for run in runs if len(run) > 1)
