"""Requests aiohttp's HTTP parser refuses (a header or request line over 8190 bytes, too
many headers, a broken chunked body) answer JSON with ``Server: turnstate``, as every
other error does, never aiohttp's plain text naming Python's and aiohttp's versions."""

from __future__ import annotations

import asyncio
import json

import pytest

from tests.server.support import Api

REFUSED = {
    "long_header": (b"GET /api/chats HTTP/1.1\r\nHost: x\r\nX-Long: " + b"a" * 9000
                    + b"\r\n\r\n", "header_too_large"),
    "long_request_line": (b"GET /" + b"a" * 9000 + b" HTTP/1.1\r\nHost: x\r\n\r\n",
                          "header_too_large"),
    "many_headers": (b"GET / HTTP/1.1\r\nHost: x\r\n"
                     + b"".join(b"X-%d: a\r\n" % i for i in range(200)) + b"\r\n",
                     "bad_request"),
    "broken_chunks": (b"POST /api/chats HTTP/1.1\r\nHost: x\r\n"
                      b"Transfer-Encoding: chunked\r\n\r\nzz\r\n", "bad_request"),
    "length_beside_chunked": (b"POST /api/chats HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n"
                              b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n", "bad_request"),
    "brotli_body": (b"POST /api/chats HTTP/1.1\r\nHost: x\r\nContent-Encoding: br\r\n"
                         b"Content-Length: 2\r\n\r\n{}", "bad_request"),
}


async def _raw(api: Api, request: bytes) -> tuple[int, dict[str, str], bytes]:
    """Send ``request`` as is; the answer's status, headers and body (read until the
    server closes the connection)."""
    reader, writer = await asyncio.open_connection(api.client.host, api.client.port)
    writer.write(request)
    await writer.drain()
    answer = await reader.read()
    writer.close()
    head, _, body = answer.partition(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines)}
    return int(status_line.split()[1]), headers, body


@pytest.mark.parametrize("name", sorted(REFUSED))
async def test_a_refused_request_answers_json_without_versions(api: Api, name: str) -> None:
    request, error = REFUSED[name]
    status, headers, body = await _raw(api, request)
    assert status == 400, (status, body[:200])
    assert headers["server"] == "turnstate", headers
    assert headers["content-type"].startswith("application/json"), headers
    answer = json.loads(body)
    assert (answer["status"], answer["error"]) == (400, error), answer
    assert b"aaaa" not in body  # the refused line is not echoed back


async def test_routed_answers_and_errors_name_no_versions(api: Api) -> None:
    for path, status in (("/", 200), ("/nowhere", 404), ("/api/chats", 401)):
        response = await api.client.get(path)
        assert response.status == status
        assert response.headers["Server"] == "turnstate", (path, response.headers)
