"""``Expect: 100-continue`` is answered as the request would be, before its body.

aiohttp's default answered every such request ``100 Continue`` before the middlewares
ran: a request without a valid token, or whose ``Content-Length`` was over the route's
limit, was invited to upload its body, and only then refused (401, 413). Each route now
answers the expectation itself: the 401 or the 413 instead of ``100 Continue``, the
connection closed; a request that passes gets ``100 Continue`` and its answer as before.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from tests.server.support import Api, turn_body


async def _expecting(api: Api, method: str, path: str, length: int,
                     auth: str | None = "alice-token") -> tuple[asyncio.StreamReader,
                                                               asyncio.StreamWriter, bytes]:
    """Send the head of a request with ``Expect: 100-continue`` and no body; returns the
    first answer's head (an interim ``100 Continue`` or a final status)."""
    server = api.client.server
    reader, writer = await asyncio.open_connection(server.host, server.port)
    token = f"Authorization: Bearer {auth}\r\n" if auth else ""
    writer.write(f"{method} {path} HTTP/1.1\r\nHost: localhost\r\n{token}"
                 f"Content-Type: application/json\r\nContent-Length: {length}\r\n"
                 "Expect: 100-continue\r\n\r\n".encode())
    await writer.drain()
    async with asyncio.timeout(30):
        head = await reader.readuntil(b"\r\n\r\n")
    return reader, writer, head


async def _final(reader: asyncio.StreamReader, head: bytes) -> dict[str, object]:
    """The JSON body of a final answer whose head was read (the server closes after it)."""
    async with asyncio.timeout(30):
        body = await reader.read()
    assert b"connection: close" in head.lower(), head
    return json.loads(body)  # type: ignore[no-any-return]


@pytest.mark.parametrize("auth", [None, "wrong-token"])
async def test_no_valid_token_is_a_401_instead_of_100(api: Api, auth: str | None) -> None:
    chat = await api.new_chat()
    reader, writer, head = await _expecting(api, "PATCH", f"/api/chats/{chat}/messages/1",
                                            100, auth)
    try:
        assert head.startswith(b"HTTP/1.1 401 "), head
        assert b'WWW-Authenticate: Bearer realm="turnstate"' in head
        assert (await _final(reader, head))["error"] == "unauthorized"
    finally:
        writer.close()


@pytest.mark.parametrize(("path", "over"), [
    ("/api/chats/CHAT/messages/1", 64 * 1024 + 1),  # max_body_bytes
    ("/api/chats/CHAT/turns", 256 * 1024 + 1),  # a turn's: max_content_bytes
    ("/api/ui-messages", 256 * 1024 + 1),
])
async def test_a_body_over_the_route_s_limit_is_a_413_instead_of_100(
        api: Api, path: str, over: int) -> None:
    chat = await api.new_chat()
    method = "PATCH" if "messages/1" in path else "POST"
    reader, writer, head = await _expecting(api, method, path.replace("CHAT", chat), over)
    try:
        assert head.startswith(b"HTTP/1.1 413 "), head
        assert (await _final(reader, head))["error"] == "body_too_large"
    finally:
        writer.close()


async def test_a_request_that_passes_gets_100_then_its_answer(api: Api) -> None:
    """A turn's body over ``max_body_bytes`` but within its own limit continues too."""
    chat = await api.new_chat()
    await api.turn(chat, text="the question")
    body = json.dumps({"text": "x" * 1_000}).encode()
    reader, writer, head = await _expecting(
        api, "PATCH", f"/api/chats/{chat}/messages/1", len(body))
    try:
        assert head == b"HTTP/1.1 100 Continue\r\n\r\n"
        writer.write(body)
        async with asyncio.timeout(30):
            answer = await reader.readuntil(b"\r\n\r\n")
        assert answer.startswith(b"HTTP/1.1 200 "), answer
    finally:
        writer.close()
    big = json.dumps(turn_body(text="y" * 1_000, padding="z" * (70 * 1024))).encode()
    reader, writer, head = await _expecting(api, "POST", f"/api/chats/{chat}/turns",
                                            len(big))
    try:
        assert head == b"HTTP/1.1 100 Continue\r\n\r\n"
    finally:
        writer.close()


@pytest.mark.parametrize(("method", "path", "status", "error"), [
    ("POST", "/api/no-such-route", 404, "no_route"),
    ("POST", "/nowhere", 404, "no_route"),
    ("PUT", "/api/chats/CHAT", 405, "method_not_allowed"),  # GET and DELETE only
    ("POST", "/api/chats/CHAT/messages/1", 405, "method_not_allowed"),
])
async def test_a_path_or_method_no_route_takes_is_answered_instead_of_100(
        api: Api, method: str, path: str, status: int, error: str) -> None:
    """aiohttp's own expect handler answered these ``100 Continue``: the client uploaded
    a body that no handler would read, then got the 404 or 405."""
    chat = await api.new_chat()
    reader, writer, head = await _expecting(api, method, path.replace("CHAT", chat), 100)
    try:
        assert head.startswith(f"HTTP/1.1 {status} ".encode()), head
        if status == 405:
            assert b"\r\nAllow: " in head, head
        assert (await _final(reader, head))["error"] == error
    finally:
        writer.close()


async def test_an_unrouted_api_path_without_a_token_is_a_401_instead_of_100(
        api: Api) -> None:
    """As the middlewares answer it without ``Expect``: the token first."""
    reader, writer, head = await _expecting(api, "POST", "/api/no-such-route", 100, None)
    try:
        assert head.startswith(b"HTTP/1.1 401 "), head
        assert (await _final(reader, head))["error"] == "unauthorized"
    finally:
        writer.close()


async def test_a_405_names_the_methods_its_path_takes(api: Api) -> None:
    chat = await api.new_chat()
    response = await api.call("PUT", f"/api/chats/{chat}", json={})
    assert response.status == 405
    assert set(response.headers["Allow"].split(",")) >= {"GET", "DELETE"}
    assert (await response.json())["error"] == "method_not_allowed"


@pytest.mark.parametrize("path", ["/static/no-such-file.js", "/static/vendor",
                                  "/static/../_app.py"])
async def test_a_missing_static_file_is_a_404_instead_of_100(api: Api, path: str) -> None:
    """The static route kept aiohttp's expect handler: ``100 Continue`` for a file that
    is not there, then the 404 (a folder: the 403 a plain GET of it gets)."""
    plain = await api.call("GET", path)
    reader, writer, head = await _expecting(api, "GET", path, 10)
    try:
        assert head.startswith(f"HTTP/1.1 {plain.status} ".encode()), head
        assert (await _final(reader, head))["error"] == {
            404: "no_route", 403: "forbidden"}[plain.status]
    finally:
        writer.close()


async def test_a_static_file_that_is_there_still_gets_100(api: Api) -> None:
    reader, writer, head = await _expecting(api, "GET", "/static/app.js", 0)
    try:
        assert head.startswith(b"HTTP/1.1 100 "), head
        async with asyncio.timeout(30):
            final = await reader.readuntil(b"\r\n\r\n")
        assert final.startswith(b"HTTP/1.1 200 "), final
    finally:
        writer.close()
