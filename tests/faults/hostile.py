"""A small hostile SSE server on loopback: streams that never end, in several ways."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import asynccontextmanager
from typing import Any

from aiohttp import web

from turnstate.providers import SseEvent

Writer = Callable[[web.StreamResponse], "asyncio.Future[None] | object"]


async def keepalives(response: web.StreamResponse) -> None:
    """Comment lines forever: bytes keep coming, no event ever completes."""
    while True:
        await response.write(b": keepalive\n")
        await asyncio.sleep(0.005)


async def endless_line(response: web.StreamResponse) -> None:
    """One ``data`` line that never ends."""
    await response.write(b"data: ")
    while True:
        await response.write(b"x" * 4096)
        await asyncio.sleep(0)


async def endless_events(response: web.StreamResponse) -> None:
    """Complete events forever (events a parser ignores), 1 KiB each."""
    frame = b'event: noise\ndata: {"type": "noise", "pad": "' + b"n" * 1000 + b'"}\n\n'
    while True:
        await response.write(frame)
        await asyncio.sleep(0)


@asynccontextmanager
async def hostile_server(behaviour: Callable[[web.StreamResponse], object]) -> AsyncIterator[str]:
    """Serve ``behaviour`` for every POST; yields the base URL."""
    async def handle(request: web.Request) -> web.StreamResponse:
        await request.read()
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await behaviour(response)  # type: ignore[misc]
        return response

    async with _loopback(handle) as base:
        yield base


def sse_bytes(events: Iterable[SseEvent]) -> bytes:
    """``events`` as a server writes them: ``event:`` and ``data:`` lines, a blank line."""
    return b"".join(f"event: {e.event}\ndata: {e.data}\n\n".encode() for e in events)


@asynccontextmanager
async def sse_server(*answers: bytes, bodies: list[Any] | None = None) -> AsyncIterator[str]:
    """Answer the n-th POST with ``answers[n]`` as an event stream (the last one again
    after that), recording each request's JSON body in ``bodies``; yields the base URL."""
    queue = list(answers)

    async def handle(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        if bodies is not None:
            bodies.append(body)
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await response.write(queue.pop(0) if len(queue) > 1 else queue[0])
        return response

    async with _loopback(handle) as base:
        yield base


@asynccontextmanager
async def _loopback(
    handle: Callable[[web.Request], Awaitable[web.StreamResponse]],
) -> AsyncIterator[str]:
    app = web.Application()
    app.router.add_route("POST", "/{tail:.*}", handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()
