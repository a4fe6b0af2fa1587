"""The transport's connection pool (issue 24, item 9): a configurable per-host limit
sized for a chat server, 500 concurrent streams against an emulator on loopback, and
waiting for a pooled connection not counted against the connect timeout."""

from __future__ import annotations

import asyncio
import time

import aiohttp
import pytest
from aiohttp import web

from tests.providers.support import stream_call
from turnstate.core._conversation import TextPart
from turnstate.core._decisions import Strategy
from turnstate.core._errors import ProviderPoolExhausted, TransientProviderError
from turnstate.core._registry import DEFAULT_REGISTRY
from turnstate.emulators import ChatCompletionsEmulator, Fault
from turnstate.emulators._base import EmulatorServer, RecordedRequest
from turnstate.providers._protocol import ProviderCall
from turnstate.providers._transport import AiohttpTransport, PoolLimits, RetryPolicy
from turnstate.providers.chat_completions import ChatCompletionsAdapter

CALL = ProviderCall(strategy=Strategy.LOCAL_LOOP, model=DEFAULT_REGISTRY.model(
    "openai-compatible", "gpt-4o-mini"), system_prompt="Be brief.", tools=(), user_text="hi")


def adapter_for(server: EmulatorServer) -> ChatCompletionsAdapter:
    return ChatCompletionsAdapter(base_url=server.base_url + ChatCompletionsEmulator.API_PREFIX,
                                  api_key="test-key")


async def test_default_pool_is_sized_for_a_chat_server() -> None:
    """The session the transport creates allows 1,000 connections per host, none in all."""
    transport = AiohttpTransport(pool=PoolLimits())
    try:
        connector = transport._session_for_request().connector
        assert connector is not None
        assert (connector.limit_per_host, connector.limit) == (1000, 0)
    finally:
        await transport.aclose()
    small = AiohttpTransport(pool=PoolLimits(per_host=8, total=16))
    try:
        connector = small._session_for_request().connector
        assert connector is not None and (connector.limit_per_host, connector.limit) == (8, 16)
    finally:
        await small.aclose()


async def test_500_concurrent_streams_all_complete() -> None:
    """500 streams at once through one default transport: every one completes (aiohttp's
    default pool of 100 made the 101st wait, and the wait failed it as a connect timeout).
    The connect timeout is generous because 500 simultaneous connects overflow the
    loopback listen backlog on a loaded machine, and a dropped SYN is resent after 1 s."""
    emulator = ChatCompletionsEmulator()
    async with EmulatorServer(emulator) as server, \
            AiohttpTransport(connect_timeout=10.0, retry=RetryPolicy(max_attempts=1)) as transport:
        adapter = adapter_for(server)
        started = time.perf_counter()
        results = await asyncio.gather(*(stream_call(transport, adapter, CALL)
                                         for _ in range(500)))
        elapsed = time.perf_counter() - started
    assert len(results) == 500
    assert all(isinstance(response.parts[0], TextPart) for response, _ in results)
    assert len(emulator.requests) == 500
    print(f"500 concurrent streams on loopback: {elapsed:.2f}s")


class CountingEmulator(ChatCompletionsEmulator):
    """Sets ``arrived`` once ``expected`` requests have been received."""

    def __init__(self, expected: int) -> None:
        super().__init__()
        self.expected = expected
        self.arrived = asyncio.Event()

    async def record(self, request: web.Request) -> RecordedRequest:
        recorded = await super().record(request)
        if len(self.requests) >= self.expected:
            self.arrived.set()
        return recorded


async def test_waiting_for_a_pooled_connection_is_not_a_connect_timeout() -> None:
    """Two connections, twelve streams: the first two are held open past the connect
    timeout while ten wait for the pool; all twelve complete, none as a timeout."""
    emulator = CountingEmulator(expected=2)
    gate = asyncio.Event()
    emulator.faults.push(Fault(gate=gate), Fault(gate=gate))
    connect_timeout = 0.1
    async with EmulatorServer(emulator) as server, \
            aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=2)) as session:
        transport = AiohttpTransport(session, connect_timeout=connect_timeout,
                                     retry=RetryPolicy(max_attempts=1))
        adapter = adapter_for(server)
        calls = [asyncio.create_task(stream_call(transport, adapter, CALL)) for _ in range(12)]
        await emulator.arrived.wait()  # the two pooled connections are in use
        await asyncio.sleep(connect_timeout * 3)  # time passes: the others wait past it
        assert len(emulator.requests) == 2 and not any(c.done() for c in calls)
        gate.set()
        results = await asyncio.gather(*calls)
    assert len(results) == 12 and len(emulator.requests) == 12


async def test_a_saturated_pool_fails_the_call_after_the_pool_wait_not_a_hang() -> None:
    """One connection, held open by a stream: the next call waits ``wait_seconds`` for it
    and fails with ``ProviderPoolExhausted`` (retryable, not retried: no backoff slept,
    nothing sent); once the stream ends the pool serves again."""
    emulator = CountingEmulator(expected=1)
    gate = asyncio.Event()
    emulator.faults.push(Fault(gate=gate))
    slept: list[float] = []

    async def sleep(delay: float) -> None:
        slept.append(delay)

    pool = PoolLimits(per_host=1, wait_seconds=0.2)
    async with EmulatorServer(emulator) as server, AiohttpTransport(
            pool=pool, retry=RetryPolicy(max_attempts=3), sleep=sleep) as transport:
        adapter = adapter_for(server)
        holder = asyncio.create_task(stream_call(transport, adapter, CALL))
        await emulator.arrived.wait()  # the pool's one connection is in use
        loop = asyncio.get_running_loop()
        started = loop.time()
        async with asyncio.timeout(10):  # a hang fails here, not in the test runner
            with pytest.raises(ProviderPoolExhausted) as caught:
                await stream_call(transport, adapter, CALL)
        waited = loop.time() - started
        assert waited >= pool.wait_seconds
        error = caught.value
        assert error.retryable and error.kind == "pool_exhausted"
        assert error.code == "pool_exhausted" and error.provider == "openai-compatible"
        assert "0.2s" in error.detail and slept == [] and len(emulator.requests) == 1
        gate.set()
        await holder
        response, _ = await stream_call(transport, adapter, CALL)
    assert isinstance(response.parts[0], TextPart) and len(emulator.requests) == 2


def test_pool_wait_must_be_positive() -> None:
    assert PoolLimits().wait_seconds == 30.0
    with pytest.raises(ValueError, match="wait_seconds"):
        PoolLimits(wait_seconds=0)


async def test_a_callers_saturated_session_fails_as_a_connect_timeout_not_a_hang() -> None:
    """A caller's session has no hook for the pool wait: its connect timeout bounds the
    wait and the connection together (``wait_seconds + connect_timeout``), never
    unbounded (it was, with the pool wait taken out of the connect timeout)."""
    emulator = CountingEmulator(expected=1)
    gate = asyncio.Event()
    emulator.faults.push(Fault(gate=gate))
    async with EmulatorServer(emulator) as server, \
            aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=1)) as session:
        transport = AiohttpTransport(session, connect_timeout=0.1,
                                     pool=PoolLimits(wait_seconds=0.2),
                                     retry=RetryPolicy(max_attempts=1))
        adapter = adapter_for(server)
        holder = asyncio.create_task(stream_call(transport, adapter, CALL))
        await emulator.arrived.wait()
        async with asyncio.timeout(10):
            with pytest.raises(TransientProviderError, match="connect timeout"):
                await stream_call(transport, adapter, CALL)
        gate.set()
        await holder
    assert len(emulator.requests) == 1
