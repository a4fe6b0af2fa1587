"""A turn's stream asked for over HTTP/1.0 with ``Connection: keep-alive`` ends the
connection with its body.

HTTP/1.0 has no chunked encoding: a body of no stated length ends where the
connection does. aiohttp drops keep-alive for such an answer only in a local variable
(``StreamResponse._prepare_headers``), and a turn's stream sent ``Connection:
keep-alive`` of its own: the client (or an HTTP/1.0 proxy keeping its upstream
connections) read the body to a close that never came, and the next request on the
connection was answered inside the stream's body.
"""

from __future__ import annotations

import asyncio
import json

from tests.server.support import Api, turn_body

_AUTH = b"Authorization: Bearer alice-token\r\n"


async def _then_config(api: Api, first: bytes) -> bytes:
    """``first`` (an HTTP/1.0 keep-alive request) then ``GET /api/config``, on one
    connection, read to its end."""
    server = api.client.server
    reader, writer = await asyncio.open_connection(server.host, server.port)
    writer.write(first + b"GET /api/config HTTP/1.0\r\nHost: x\r\n" + _AUTH + b"\r\n")
    async with asyncio.timeout(30):
        answer = await reader.read()
    writer.close()
    return answer


def _one_stream(answer: bytes) -> None:
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.0 200 "), head
    headers = head.lower().split(b"\r\n")
    assert b"connection: keep-alive" not in headers, head
    assert b"connection: close" in headers, head
    assert b"HTTP/1." not in body, body[-300:]  # no second answer inside the body
    assert body.rstrip().endswith(b'"type":"turn_completed"}'), body[-200:]


async def test_an_http10_keep_alive_turn_stream_closes_its_connection(api: Api) -> None:
    chat = await api.new_chat()
    body = json.dumps(turn_body()).encode()
    answer = await _then_config(api, b"POST /api/chats/%s/turns HTTP/1.0\r\nHost: x\r\n"
                                b"Connection: keep-alive\r\n" % chat.encode() + _AUTH +
                                b"Content-Length: %d\r\n\r\n" % len(body) + body)
    _one_stream(answer)


async def test_an_http10_keep_alive_resume_closes_its_connection(api: Api) -> None:
    chat = await api.new_chat()
    turn = (await api.turn(chat))[-1].data["turnId"]
    answer = await _then_config(api, b"GET /api/chats/%s/turns/%s/events HTTP/1.0\r\n"
                                b"Host: x\r\nConnection: keep-alive\r\n"
                                % (chat.encode(), turn.encode()) + _AUTH + b"\r\n")
    _one_stream(answer)


async def test_an_http11_stream_keeps_its_connection(api: Api) -> None:
    """HTTP/1.1 frames the stream in chunks: the connection carries the next request."""
    chat = await api.new_chat()
    turn = (await api.turn(chat))[-1].data["turnId"]
    server = api.client.server
    reader, writer = await asyncio.open_connection(server.host, server.port)
    writer.write(b"GET /api/chats/%s/turns/%s/events HTTP/1.1\r\nHost: x\r\n"
                 % (chat.encode(), turn.encode()) + _AUTH + b"\r\n" +
                 b"GET /api/config HTTP/1.1\r\nHost: x\r\nConnection: close\r\n" + _AUTH +
                 b"\r\n")
    async with asyncio.timeout(30):
        answer = await reader.read()
    writer.close()
    assert answer.count(b"HTTP/1.1 200 OK\r\n") == 2, answer[-300:]
    assert b"transfer-encoding: chunked" in answer.lower()
