"""A provider (or a proxy) that never reads the request body: the idle timeout ends the
request, it does not wait forever (attack3).

aiohttp arms its read timeout only once the body is written, and a write has no timeout:
a request larger than the socket buffers (a chat replayed with its images) waited in
``drain`` for ever against a peer that accepted the connection and read nothing. The
turn hung with its chat held. ``_request_body.PacedBody`` gives each slice of a large
body ``idle_timeout`` to leave.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import attrs
import pytest
from aiohttp import web

from tests.engine.support import FakeClock, collect, make_turn
from tests.faults.rig import quick_transport
from tests.providers.test_transport import classify, request_for, serve
from turnstate.core._conversation import TextPart
from turnstate.core._errors import TransientProviderError
from turnstate.core._media import FilePart
from turnstate.engine import TurnEngine
from turnstate.providers import AnthropicAdapter
from turnstate.providers._request_body import PACED_ABOVE, PacedBody, request_data
from turnstate.storage import MemoryStore

BIG = 48 << 20  # past any loopback socket's buffers


@asynccontextmanager
async def never_reading() -> AsyncIterator[str]:
    """Accepts connections and never reads a byte (nor answers)."""
    held: list[asyncio.StreamWriter] = []
    done = asyncio.Event()

    async def accept(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held.append(writer)
        await done.wait()

    server = await asyncio.start_server(accept, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        done.set()
        for writer in held:
            writer.close()
        server.close()


async def test_a_peer_that_reads_nothing_ends_a_large_request_at_the_idle_timeout() -> None:
    async with never_reading() as base, quick_transport(idle_timeout=0.5) as transport:
        request = attrs.evolve(request_for(base + "/v1/stream"), body=b"x" * BIG)
        started = time.monotonic()
        with pytest.raises(TransientProviderError, match="idle timeout"):
            async with asyncio.timeout(20):  # the old code waited here until this guard
                async for _ in transport.stream(request, classify):
                    pass
    assert time.monotonic() - started < 10


async def test_a_large_body_arrives_whole_with_its_length() -> None:
    seen: dict[str, object] = {}

    async def handler(request: web.Request) -> web.StreamResponse:
        body = await request.content.read()  # past the test server's 1 MiB request.read()
        seen.update(length=request.headers.get("Content-Length"), chunked="Transfer-Encoding"
                    in request.headers, body=body, type=request.headers.get("Content-Type"))
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await response.write(b"data: {}\n\n")
        return response

    body = bytes(range(256)) * ((3 << 20) // 256) + b"tail"
    async with serve(handler) as server, quick_transport(idle_timeout=5.0) as transport:
        request = attrs.evolve(request_for(server), body=body)
        events = [e async for e in transport.stream(request, classify)]
    assert len(events) == 1
    assert seen == {"length": str(len(body)), "chunked": False, "body": body,
                    "type": "application/json"}


def test_only_a_large_body_is_paced() -> None:
    small = b"y" * PACED_ABOVE
    assert request_data(small, 1.0, "application/json") is small
    assert isinstance(request_data(small + b"y", 1.0, None), PacedBody)


async def test_a_turn_against_a_peer_that_reads_nothing_aborts_typed() -> None:
    """The engine: a 16 MiB PDF turn aborts ``provider_failed``; the chat is free (a PDF:
    one 16 MiB image is past Anthropic's per-image limit, refused before the lease)."""
    image = FilePart(data=b"%PDF-1.4\n" + bytes(16 << 20))
    store = MemoryStore(clock=FakeClock())
    chat = await store.create_chat(owner="unread")
    async with never_reading() as base, quick_transport(idle_timeout=0.5) as transport:
        adapter = AnthropicAdapter(base_url=base + "/v1", api_key="k")
        engine = TurnEngine(store, {"anthropic": adapter}, transport, clock=FakeClock())
        async with asyncio.timeout(20):
            outcome = await collect(engine.run_turn(chat.id, make_turn(
                "look", provider="anthropic", model="claude-sonnet-4-5",
                content=(TextPart(text="look"), image))))
    final = outcome.final
    assert final.type == "turn_aborted" and final.reason == "provider_failed", final
    assert "idle timeout" in (final.detail or "")
    assert (await store.load_chat(chat.id)).active_turn_id is None
