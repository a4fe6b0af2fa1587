"""A complete call's connection goes back to the pool (issue 26): the call ends at its
terminal frame, and what is left of the body (the chunked terminator, when it comes
later) is read by a tracked drain task within ``DrainLimits``; past them, on failure, on
``aclose()`` and for a call stopped before its terminal frame, the connection is closed.

The loopback server counts the connections it sees (by peer address) and notices each
one the client closes (its handler is cancelled)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import aclosing, asynccontextmanager

import aiohttp
import pytest
from aiohttp import web

from tests.helpers import provider_stream
from turnstate.core._conversation import TextPart
from turnstate.core._decisions import Strategy
from turnstate.core._registry import DEFAULT_REGISTRY
from turnstate.providers._protocol import ProviderCall, ProviderResponse
from turnstate.providers._transport import AiohttpTransport, RetryPolicy
from turnstate.providers._transport_settings import DrainLimits
from turnstate.providers.chat_completions import ChatCompletionsAdapter

CALL = ProviderCall(strategy=Strategy.LOCAL_LOOP, model=DEFAULT_REGISTRY.model(
    "openai-compatible", "gpt-4o-mini"), system_prompt="Be brief.", tools=(), user_text="hi")


def _frame(delta: dict[str, object], finish: str | None = None) -> str:
    body = {"id": "c1", "object": "chat.completion.chunk", "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    return f"data: {json.dumps(body)}\n\n"


BODY = (_frame({"role": "assistant", "content": "hello"}) + _frame({}, "stop")
        + "data: [DONE]\n\n").encode()
"""A whole answer, its terminal frame (``[DONE]``) last."""


class Server:
    """Answers every POST with ``BODY``, chunked, then goes on only as the test says
    (``ends``): ``"end"`` writes the terminator, ``"never"`` holds the stream open, bytes
    are written. ``whole`` answers with a Content-Length body instead (its end arrives
    with the terminal frame)."""

    def __init__(self, *, whole: bool = False) -> None:
        self.whole = whole
        self.peers: list[object] = []
        self.ends: asyncio.Queue[str | bytes] = asyncio.Queue()
        self.disconnected = asyncio.Event()
        self.url = ""

    async def handle(self, request: web.Request) -> web.StreamResponse:
        assert request.transport is not None
        peer = request.transport.get_extra_info("peername")
        if peer not in self.peers:
            self.peers.append(peer)
        await request.read()
        if self.whole:
            return web.Response(body=BODY, content_type="text/event-stream")
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        try:
            await response.write(BODY)
            while isinstance(then := await self.ends.get(), bytes):
                await response.write(then)
            if then == "never":
                await asyncio.Future()  # held open until the client goes
            await response.write_eof()
        except asyncio.CancelledError:  # the client closed the connection
            self.disconnected.set()
            raise
        return response


@asynccontextmanager
async def serving(server: Server) -> AsyncIterator[Server]:
    app = web.Application()
    app.router.add_post("/{tail:.*}", server.handle)
    runner = web.AppRunner(app, handler_cancellation=True, shutdown_timeout=0.1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    server.url = f"http://127.0.0.1:{port}/v1"
    try:
        yield server
    finally:
        await runner.cleanup()


async def call(transport: AiohttpTransport, server: Server) -> ProviderResponse:
    """One call through the boundary; its response (the last item)."""
    adapter = ChatCompletionsAdapter(base_url=server.url, api_key="test-key")
    items = [item async for item in provider_stream(transport, adapter,
                                                     adapter.build_request(CALL))]
    response = items[-1]
    assert isinstance(response, ProviderResponse)
    assert response.parts == (TextPart(text="hello"),)
    return response


def drains(transport: AiohttpTransport) -> set[asyncio.Task[None]]:
    return set(getattr(transport, "_drains", ()))


async def test_a_late_body_end_is_drained_and_the_connection_reused() -> None:
    """The body's end arrives after the call returned at ``[DONE]``: a drain task reads
    it and the connection goes back to the pool; 5 calls, 1 connection (the transport
    closed each connection at the terminal frame before, 5)."""
    async with serving(Server()) as server, \
            AiohttpTransport(retry=RetryPolicy(max_attempts=1)) as transport:
        pending_after_call = []
        for _ in range(5):
            async with asyncio.timeout(10):  # a guard, not a synchronisation
                await call(transport, server)
                pending = drains(transport)
                pending_after_call.append(len(pending))
                server.ends.put_nowait("end")
                await asyncio.gather(*pending)
        assert len(server.peers) == 1
        assert pending_after_call == [1] * 5  # each call returned before its body's end
        assert not drains(transport)
        assert not server.disconnected.is_set()


async def test_a_body_end_already_in_needs_no_drain() -> None:
    """With the body's end in at the terminal frame, the connection is pooled at once,
    no task started."""
    async with serving(Server(whole=True)) as server, AiohttpTransport() as transport:
        for _ in range(3):
            await call(transport, server)
            assert not drains(transport)
        assert len(server.peers) == 1


async def test_a_body_that_never_ends_is_given_up_at_the_time_bound() -> None:
    """The server holds the stream open after ``[DONE]``: the call still returns there,
    the drain gives up at its bound and closes the connection; the next call opens a
    new one."""
    limits = DrainLimits(seconds=0.05)
    async with serving(Server()) as server, AiohttpTransport(drain=limits) as transport:
        async with asyncio.timeout(10):
            server.ends.put_nowait("never")
            await call(transport, server)
            pending = drains(transport)
            assert len(pending) == 1
            await asyncio.gather(*pending)
            await server.disconnected.wait()
            server.ends.put_nowait("end")
            await call(transport, server)
            server.ends.put_nowait("end")
            await asyncio.gather(*drains(transport))
        assert len(server.peers) == 2


async def test_a_long_remainder_is_given_up_at_the_byte_bound() -> None:
    """More than ``max_bytes`` after the terminal frame: the drain stops reading and
    closes the connection (well before its time bound)."""
    limits = DrainLimits(seconds=60.0, max_bytes=1024)
    async with serving(Server()) as server, AiohttpTransport(drain=limits) as transport:
        async with asyncio.timeout(10):
            await call(transport, server)
            server.ends.put_nowait(b": keepalive\n\n" * 200)
            server.ends.put_nowait("never")
            await asyncio.gather(*drains(transport))
            await server.disconnected.wait()


@pytest.mark.parametrize("own_session", [True, False])
async def test_aclose_cancels_a_pending_drain(own_session: bool) -> None:
    """Closing the transport with a drain pending cancels it and closes its connection,
    with the transport's own session and with a caller's."""
    async with serving(Server()) as server:
        async with asyncio.timeout(10):
            session = None if own_session else aiohttp.ClientSession()
            transport = AiohttpTransport(session)
            server.ends.put_nowait("never")
            await call(transport, server)
            (task,) = drains(transport)
            await transport.aclose()
            assert task.cancelled()
            assert not drains(transport)
            await server.disconnected.wait()
            if session is not None:
                await session.close()


async def test_a_call_stopped_before_its_terminal_frame_closes_at_once() -> None:
    """A call abandoned mid-stream (cancelled, failed) starts no drain: its connection
    is closed at once."""
    async with serving(Server()) as server, AiohttpTransport() as transport:
        adapter = ChatCompletionsAdapter(base_url=server.url, api_key="test-key")
        async with asyncio.timeout(10):
            async with aclosing(provider_stream(transport, adapter,
                                                adapter.build_request(CALL))) as items:
                async for _ in items:
                    break
            assert not drains(transport)
            await server.disconnected.wait()
