"""A large answer a client does not read is counted and bounded in time (attack4).

aiohttp writes a handler's answer after the handler, with no timeout, and a keep-alive
connection holds its last answer until its next request. A client with a token that
asked for a large answer (the 20 MiB image a user attached, a long chat's
``ui-messages``) and read nothing held those bytes in the process for as long as it
kept the connection, and no limit counted such connections: 300 connections asking for
a 180 KB image held 57 MB; 100 asking for a 4 MiB one, 362 MB and still growing with
each connection. ``large_answers`` now sends an answer over 64 KiB as a stream: it holds
one of the owner's streams (429 ``too_many_streams`` past ``max_streams_per_owner``), is
cut when not taken in time, and its connection is closed after it.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
import socket
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from tests.server.support import Api, turn_body
from turnstate.server import ServerConfig
from turnstate.server._http import OWNER, errors
from turnstate.server._owner_limits import LARGE_ANSWER_BYTES, OwnerLimits, large_answers

PNG = (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + (640).to_bytes(4, "big")
       + (480).to_bytes(4, "big") + b"\x08\x02\x00\x00\x00")
STREAMS = 2


@pytest.fixture
def config() -> ServerConfig:
    return ServerConfig(max_body_bytes=64 * 1024, max_content_bytes=24 << 20,
                        max_text_chars=2_000, max_streams_per_owner=STREAMS)


async def _image_chat(api: Api, size: int) -> str:
    chat = await api.new_chat()
    image = base64.b64encode(PNG + os.urandom(size)).decode()
    response = await api.call("POST", f"/api/chats/{chat}/turns", json=turn_body(
        "look", content=[{"type": "image", "mediaType": "image/png", "data": image}]))
    assert response.status == 200 and "turn_completed" in await response.text()
    return chat


@asynccontextmanager
async def _unread(host: str, port: int, path: str) -> AsyncIterator[socket.socket]:
    """A connection that asks for ``path`` and reads only the answer's status line (a
    small receive buffer: the rest waits in the server)."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.settimeout(10)
    sock.connect((host, port))
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer alice-token"
                 "\r\n\r\n".encode())
    try:
        head = await asyncio.to_thread(sock.recv, 12)
        assert head == b"HTTP/1.1 200", head
        yield sock
    finally:
        sock.close()


async def test_large_answers_nobody_reads_hold_the_owners_streams(api: Api) -> None:
    chat = await _image_chat(api, 12 << 20)
    part = f"/api/chats/{chat}/messages/1/parts/1"
    host, port = api.client.host, api.client.port
    async with _unread(host, port, part), _unread(host, port, part):
        assert api.services.limits.streams == {"alice": STREAMS}
        refused = await api.call("GET", part)
        assert refused.status == 429, await refused.text()
        assert (await refused.json())["error"] == "too_many_streams"
        assert (await api.call("GET", f"/api/chats/{chat}")).status == 200  # small: free
        assert (await api.call("GET", part, owner="bob")).status == 404


async def test_a_large_answer_closes_its_connection_a_small_one_does_not(api: Api) -> None:
    chat = await _image_chat(api, 2 * LARGE_ANSWER_BYTES)
    large = await api.call("GET", f"/api/chats/{chat}/messages/1/parts/1")
    assert large.status == 200 and len(await large.read()) > LARGE_ANSWER_BYTES
    assert large.headers.get("Connection", "").lower() == "close"
    small = await api.call("GET", f"/api/chats/{chat}")
    assert small.status == 200 and small.headers.get("Connection", "").lower() != "close"
    assert api.services.limits.streams == {}


class _Watched(OwnerLimits):
    """Owner limits that say when a stream is given back."""

    def __init__(self, max_streams: int, max_turns: int) -> None:
        super().__init__(max_streams, max_turns)
        self.given_back = asyncio.Event()

    @contextlib.contextmanager
    def stream(self, owner: str) -> Iterator[None]:
        with super().stream(owner):
            yield
        self.given_back.set()


async def test_a_large_answer_not_taken_in_time_is_cut() -> None:
    body = b"x" * (24 << 20)
    limits = _Watched(max_streams=4, max_turns=4)

    @web.middleware
    async def owned(request: web.Request, handler):  # type: ignore[no-untyped-def]
        request[OWNER] = "alice"
        return await handler(request)

    async def big(_: web.Request) -> web.Response:
        return web.Response(body=body)

    app = web.Application(middlewares=[errors, owned, large_answers(
        limits, send_timeout=0.2, min_rate=float("inf"))])
    app.router.add_get("/big", big)
    server = TestServer(app)
    await server.start_server()
    try:
        async with _unread(server.host, server.port, "/big") as sock:
            async with asyncio.timeout(10):  # cut at its timeout: the slot given back
                await limits.given_back.wait()
            assert limits.streams == {}
            received = 12
            while chunk := await asyncio.to_thread(_recv_or_reset, sock):
                received += len(chunk)
        assert received < len(body)
    finally:
        await server.close()


def _recv_or_reset(sock: socket.socket) -> bytes:
    try:
        return sock.recv(1 << 20)
    except ConnectionResetError:
        return b""
