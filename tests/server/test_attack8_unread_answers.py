"""Answers a client never reads do not hold its connection for ever (attack8).

aiohttp writes the answer a handler returns (a page file, a small JSON answer, an
error) after the handler, with no time limit, and a client may pipeline requests: one
that sends a hundred ``GET /static/vendor/purify.es.js`` on a connection and reads
nothing fills the kernel's buffers, and the next answer's write (``sendfile``, or a
gzip stream's ``drain``) waits for the peer for ever. No token is needed for the page's
files, so any client held any number of the process's sockets that way: 5 such
connections were all still open 20 s later with a 0.5 s read timeout. The connection
handler now gives each such answer ``send_timeout`` (plus its size at the slowest rate
taken) and aborts the connection past it.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator

import pytest
from aiohttp import web
from aiohttp.web_protocol import RequestHandler

from tests.server.support import Api
from turnstate.server import create_app
from turnstate.server._runner import TurnstateRunner

SEND_TIMEOUT = 0.3
CONNECTIONS = 3


async def _runner(api: Api) -> AsyncIterator[tuple[TurnstateRunner, int]]:
    runner = TurnstateRunner(create_app(api.services), keepalive_timeout=SEND_TIMEOUT,
                             send_timeout=SEND_TIMEOUT)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    try:
        yield runner, next(iter(runner.addresses))[1]
    finally:
        await runner.cleanup()


@pytest.fixture
async def served(api: Api) -> AsyncIterator[tuple[TurnstateRunner, int]]:
    async for pair in _runner(api):
        yield pair


async def _pipeline_unread(port: int, request: bytes, count: int) -> socket.socket:
    """A connection that sends ``count`` copies of ``request`` and reads nothing (a
    small receive buffer: the answers wait in the server)."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1024)
    sock.setblocking(False)
    loop = asyncio.get_running_loop()
    await loop.sock_connect(sock, ("127.0.0.1", port))
    try:
        async with asyncio.timeout(0.5):  # the server stops reading once its queue is full
            await loop.sock_sendall(sock, request * count)
    except TimeoutError:
        pass
    return sock


def _watch_lost(server: web.Server, count: int) -> asyncio.Event:
    """An event set once the server has lost ``count`` connections (aborted or closed:
    their sockets released)."""
    lost, seen, forward = asyncio.Event(), [], server.connection_lost

    def connection_lost(handler: RequestHandler, exc: BaseException | None = None) -> None:
        forward(handler, exc)
        seen.append(handler)
        if len(seen) >= count:
            lost.set()

    server.connection_lost = connection_lost  # type: ignore[method-assign]
    return lost


PAGE_FILE = b"GET /static/vendor/purify.es.js HTTP/1.1\r\nHost: localhost\r\n"


@pytest.mark.parametrize(("request_bytes", "count"), [
    (PAGE_FILE + b"\r\n", 100),  # sendfile
    (PAGE_FILE + b"Accept-Encoding: gzip\r\n\r\n", 400),  # a gzip stream's drain
    (b"GET /api/config HTTP/1.1\r\nHost: localhost\r\n"
     b"Authorization: Bearer alice-token\r\n\r\n", 2_000),  # small JSON answers
], ids=["sendfile", "gzip", "api"])
async def test_a_connection_that_reads_no_answer_is_cut_after_the_send_timeout(
        served: tuple[TurnstateRunner, int], request_bytes: bytes, count: int) -> None:
    runner, port = served
    server = runner.server
    assert server is not None
    lost = _watch_lost(server, CONNECTIONS)
    socks = await asyncio.gather(*(_pipeline_unread(port, request_bytes, count)
                                   for _ in range(CONNECTIONS)))
    try:
        assert not lost.is_set()  # each one stuck writing
        async with asyncio.timeout(10):  # SEND_TIMEOUT and the files' size at 32 KiB/s
            await lost.wait()
    finally:
        for sock in socks:
            sock.close()
