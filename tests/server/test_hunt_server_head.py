"""``HEAD`` on a stream route sends no body after its headers.

aiohttp answers ``HEAD`` on every ``GET`` route; a plain answer drops its body for it,
but a stream writes its own. ``HEAD .../turns/{id}/events`` streamed the turn's events
after the headers of a keep-alive answer that announced no body, so the client read
them as the start of its next response (``event: resume_notice`` as a status line). The
stream routes now refuse ``HEAD`` (405, JSON) and the connection stays in step.
"""

from __future__ import annotations

import asyncio

from tests.server.support import Api, turn_body

_AUTH = "Authorization: Bearer alice-token\r\n"


async def _two_requests(api: Api, path: str) -> bytes:
    """``HEAD path`` then ``GET /api/config`` on one connection, read to its end."""
    server = api.client.server
    reader, writer = await asyncio.open_connection(server.host, server.port)
    writer.write(f"HEAD {path} HTTP/1.1\r\nHost: localhost\r\n{_AUTH}\r\n"
                 f"GET /api/config HTTP/1.1\r\nHost: localhost\r\n{_AUTH}"
                 "Connection: close\r\n\r\n".encode())
    async with asyncio.timeout(30):
        answer = await reader.read()
    writer.close()
    return answer


async def test_head_on_the_stream_routes_keeps_the_connection_in_step(api: Api) -> None:
    chat = await api.new_chat()
    response = await api.call("POST", f"/api/chats/{chat}/turns", json=turn_body())
    turn = response.headers["X-Turn-Id"]
    await response.read()
    for path in (f"/api/chats/{chat}/turns/{turn}/events", f"/api/ui-messages/{chat}/stream"):
        answer = await _two_requests(api, path)
        head, _, rest = answer.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 405 "), head
        assert rest.startswith(b"HTTP/1.1 200 OK\r\n"), answer
        assert b'"owner": "alice"' in rest
