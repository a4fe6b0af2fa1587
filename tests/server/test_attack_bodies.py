"""Bodies an attacker sends: a chunked body past a route's limit is refused as it
arrives, not held up to the largest limit of any route first."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from tests.server.support import Api


async def _chunked_head(api: Api, path: str, chunk: bytes, method: str = "PATCH") -> bytes:
    """The answer's head to a chunked body whose first chunk is ``chunk`` and whose end
    never comes."""
    reader, writer = await asyncio.open_connection(api.client.host, api.client.port)
    writer.write(f"{method} {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer alice-token\r\n"
                 "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
                 .encode() + f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
    await writer.drain()
    async with asyncio.timeout(5):  # the body timeout is 15 s: the answer came before it
        head = await reader.readuntil(b"\r\n\r\n")
    writer.close()
    return head


async def test_a_chunked_body_past_the_limit_is_refused_as_it_arrives(api: Api) -> None:
    chat = await api.new_chat()
    limit = api.services.config.max_body_bytes  # 64 KiB here; the turn route takes 256
    head = await _chunked_head(api, f"/api/chats/{chat}/messages/1",
                               b'{"text": "' + b"a" * (limit + 1))
    assert head.startswith(b"HTTP/1.1 413 "), head
    head = await _chunked_head(api, f"/api/chats/{chat}/turns",
                               b" " * (api.services.config.max_content_bytes + 1), "POST")
    assert head.startswith(b"HTTP/1.1 413 "), head


async def test_a_chunked_body_within_the_limit_is_read_whole(api: Api) -> None:
    chat = await api.new_chat()

    async def pieces() -> AsyncIterator[bytes]:
        yield b'{"provider": "openai", "model": "gpt-4o", '
        await asyncio.sleep(0)
        yield b'"text": "in pieces"}'

    response = await api.call("POST", f"/api/chats/{chat}/turns", data=pieces(),
                              headers={"Content-Type": "application/json"})
    assert response.status == 200, await response.text()
    assert "turn_completed" in await response.text()
