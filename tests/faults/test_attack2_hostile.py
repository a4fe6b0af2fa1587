"""A hostile provider's error answers: a body nested past the JSON parser's stack is
still the HTTP status it came with, classified as such, for every adapter."""

from __future__ import annotations

import json
import tracemalloc
import zlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
from aiohttp import web

from tests.engine.support import FakeClock, collect, make_turn
from tests.faults.rig import quick_transport
from tests.faults.test_limits import MODELS, PROVIDERS
from turnstate.emulators._emulated import kind_of
from turnstate.engine import TurnEngine
from turnstate.providers import StreamLimits
from turnstate.providers._errors import error_fields
from turnstate.storage import MemoryStore

DEEP = b'{"error": ' * 100_000


@asynccontextmanager
async def answering(status: int, body: bytes) -> AsyncIterator[str]:
    async def handle(request: web.Request) -> web.Response:
        await request.read()
        return web.Response(status=status, body=body, content_type="application/json")

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


def test_error_fields_of_a_body_nested_too_deeply_is_its_text() -> None:
    assert error_fields(DEEP) == {"message": DEEP[:500].decode()}


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_deeply_nested_error_body_keeps_its_status(provider: str) -> None:
    store = MemoryStore(clock=FakeClock())
    chat = await store.create_chat(owner="hostile")
    async with answering(400, DEEP) as base_url, \
            quick_transport(limits=StreamLimits(), idle_timeout=5.0) as transport:
        adapter = kind_of(provider).adapter(base_url=base_url, api_key="hostile-test-key")
        engine = TurnEngine(store, {provider: adapter}, transport, clock=FakeClock())
        outcome = await collect(engine.run_turn(chat.id, make_turn(
            "hi", provider=provider, model=MODELS[provider])))
    final = outcome.final
    assert final.type == "turn_aborted" and final.reason == "provider_failed"
    assert "HTTP 400" in (final.detail or ""), final.detail
    assert "RecursionError" not in (final.detail or ""), final.detail
    assert (await store.load_chat(chat.id)).active_turn_id is None


def _gzip_bomb(prefix: bytes, megabytes: int) -> bytes:
    """``prefix`` then ``megabytes`` MiB of one byte, gzipped (about 1 KiB per MiB)."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    block = b"a" * (1 << 20)
    return packer.compress(prefix) + b"".join(
        packer.compress(block) for _ in range(megabytes)) + packer.flush()


@pytest.mark.parametrize(("status", "prefix"), [(200, b"data: "), (500, b'{"error": "')])
async def test_a_gzip_bomb_is_read_no_further_than_a_limit(status: int, prefix: bytes) -> None:
    """A guard (it held when written): 128 KiB of gzip that would expand to 128 MiB, as
    an event stream (cut at ``max_line_bytes``) and as an error body (cut at
    ``MAX_ERROR_BODY``), allocates a bounded amount however far it would expand."""
    bomb = _gzip_bomb(prefix, 128)

    async def handle(request: web.Request) -> web.StreamResponse:
        await request.read()
        response = web.StreamResponse(status=status, headers={
            "Content-Type": "text/event-stream" if status == 200 else "application/json",
            "Content-Encoding": "gzip"})
        await response.prepare(request)
        for start in range(0, len(bomb), 1 << 16):
            await response.write(bomb[start:start + (1 << 16)])
        return response

    app = web.Application()
    app.router.add_route("POST", "/{tail:.*}", handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    store = MemoryStore(clock=FakeClock())
    chat = await store.create_chat(owner="hostile")
    tracemalloc.start()
    try:
        async with quick_transport(limits=StreamLimits(), idle_timeout=5.0) as transport:
            adapter = kind_of("openai").adapter(base_url=f"http://127.0.0.1:{port}",
                                                api_key="hostile-test-key")
            engine = TurnEngine(store, {"openai": adapter}, transport, clock=FakeClock())
            outcome = await collect(engine.run_turn(chat.id, make_turn(
                "hi", provider="openai", model="gpt-4o")))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
        await runner.cleanup()
    assert outcome.final.type == "turn_aborted", outcome.final
    assert peak < 32 << 20, f"{peak / 2**20:.0f} MiB at peak"


ECHOED_KEY = "gateway-key-of-no-known-shape-1234"
"""A key no shape rule knows: only the request's own auth header names it secret."""


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("status", [401, 500])
async def test_a_key_echoed_in_the_error_code_reaches_no_event_and_no_record(
        provider: str, status: int) -> None:
    """A provider (or a proxy before it) that puts the request's key in its error's
    code or type: the code became the abort's state-change ``reason`` unscrubbed, sent
    to the client and stored in the turn's path."""
    fields = {"code": ECHOED_KEY, "type": ECHOED_KEY, "status": ECHOED_KEY,
              "message": f"bad key {ECHOED_KEY}"}
    body = json.dumps({"type": "error", "error": fields}).encode()
    store = MemoryStore(clock=FakeClock())
    chat = await store.create_chat(owner="hostile")
    async with answering(status, body) as base_url, \
            quick_transport(limits=StreamLimits(), idle_timeout=5.0) as transport:
        adapter = kind_of(provider).adapter(base_url=base_url, api_key=ECHOED_KEY)
        engine = TurnEngine(store, {provider: adapter}, transport, clock=FakeClock())
        outcome = await collect(engine.run_turn(chat.id, make_turn(
            "hi", provider=provider, model=MODELS[provider])))
    assert outcome.final.type == "turn_aborted", outcome.final
    assert ECHOED_KEY not in repr(outcome.events), outcome.events
    turns = await store.list_turns(chat.id, limit=None)
    assert turns and ECHOED_KEY not in repr(turns), turns
