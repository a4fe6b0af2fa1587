"""The own session's pool gate (issue 26, fourth pass): the wait for a pooled connection is
bounded by ``PoolGate`` instead of aiohttp's trace signals, so a request through a pool
with room runs no trace signal and sets no timer of the transport's; every path gives its
slot back; and the gate's queue is first come, first served, per origin and in all."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from typing import Any

import aiohttp
import pytest
from aiohttp import tracing, web

from tests.providers.test_transport import Flaky, classify, collect, error, request_for, serve
from tests.providers.test_transport_drain import Server, call, serving
from turnstate.core._errors import ProviderError, TransientProviderError
from turnstate.providers._pool import PoolGate, origin_of
from turnstate.providers._transport import AiohttpTransport, PoolLimits, RetryPolicy


def gate_of(transport: AiohttpTransport) -> PoolGate:
    gate = transport._gate
    assert gate is not None
    return gate


async def test_a_request_with_room_in_the_pool_runs_no_trace_signal_and_no_timer(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The transport's own session has no trace configs (each one cost every request
    about ten signal coroutines), and a stream whose limits are far off sets no
    ``asyncio.timeout`` of the transport's: aiohttp's ``sock_read`` is the idle timeout."""
    traces: list[object] = []
    scopes: list[str] = []
    original_trace = tracing.Trace.__init__

    def trace_init(self: tracing.Trace, *args: Any) -> None:
        traces.append(self)
        original_trace(self, *args)

    def counting(real: Callable[..., Any]) -> Callable[..., Any]:
        def scope(*args: Any) -> Any:
            caller = sys._getframe(1).f_globals.get("__name__", "")
            if caller.startswith("turnstate"):
                scopes.append(caller)
            return real(*args)
        return scope

    monkeypatch.setattr(tracing.Trace, "__init__", trace_init)
    monkeypatch.setattr(asyncio, "timeout", counting(asyncio.timeout))
    monkeypatch.setattr(asyncio, "timeout_at", counting(asyncio.timeout_at))
    async with serve(Flaky()) as server, AiohttpTransport() as transport:
        for _ in range(3):
            events = await collect(transport, request_for(server))
            assert [event.data for event in events] == ["1", "2"]
        session = transport._session
        assert session is not None and session.trace_configs == []
        assert gate_of(transport).in_use == 0
    assert traces == [] and scopes == []


async def test_every_way_a_call_ends_gives_its_slot_back() -> None:
    """A finished stream, a drained one, an error answer, a consumer that stops early and
    a refused connection all leave the gate with no slot in use."""
    async with serve(Flaky(lambda: web.json_response({}, status=400))) as server, \
            AiohttpTransport(retry=RetryPolicy(max_attempts=1)) as transport:
        with pytest.raises(ProviderError):
            await collect(transport, request_for(server))
        assert gate_of(transport).in_use == 0
        stream = transport.stream(request_for(server), classify)
        await anext(stream)
        assert gate_of(transport).in_use == 1
        await stream.aclose()
        assert gate_of(transport).in_use == 0
        await collect(transport, request_for(server))
        assert gate_of(transport).in_use == 0
    refused = AiohttpTransport(retry=RetryPolicy(max_attempts=1))
    async with refused:
        with pytest.raises(ProviderError):
            await collect(refused, request_for("http://127.0.0.1:9/v1/stream"))
        assert gate_of(refused).in_use == 0
    async with serving(Server()) as server, \
            AiohttpTransport(retry=RetryPolicy(max_attempts=1)) as transport:
        await call(transport, server)  # ends at [DONE]; the body's end comes later
        assert gate_of(transport).in_use == 1  # the drain holds the connection
        server.ends.put_nowait("end")
        await asyncio.gather(*transport._drains)
        assert gate_of(transport).in_use == 0


async def test_the_gate_serves_waiters_first_come_first_served() -> None:
    gate = PoolGate(PoolLimits(per_host=1))
    assert gate.take("a") and not gate.take("a") and gate.take("b")
    served: list[int] = []

    async def waiter(number: int) -> None:
        assert await gate.wait("a", 10)
        served.append(number)

    tasks = [asyncio.create_task(waiter(number)) for number in range(3)]
    await asyncio.sleep(0)
    for _ in range(3):
        gate.give_back("a")  # the slot goes to the first waiter, not to a newcomer
        assert not gate.take("a")
        await asyncio.sleep(0)
    await asyncio.gather(*tasks)
    assert served == [0, 1, 2] and gate.in_use == 2


async def test_the_gate_holds_the_total_across_origins() -> None:
    gate = PoolGate(PoolLimits(per_host=2, total=2))
    assert gate.take("a") and gate.take("b") and not gate.take("c")
    waiting = asyncio.create_task(gate.wait("c", 10))
    await asyncio.sleep(0)
    gate.give_back("a")
    assert await waiting and gate.in_use == 2 and not gate.take("a")


async def test_a_wait_that_runs_out_or_is_cancelled_leaves_the_queue() -> None:
    gate = PoolGate(PoolLimits(per_host=1))
    assert gate.take("a")
    assert not await gate.wait("a", 0.01)
    cancelled = asyncio.create_task(gate.wait("a", 10))
    await asyncio.sleep(0)
    cancelled.cancel()
    with pytest.raises(asyncio.CancelledError):
        await cancelled
    gate.give_back("a")  # nobody waits: the slot is free again
    assert gate.in_use == 0 and gate.take("a")


async def test_a_waiter_handed_a_slot_then_cancelled_passes_it_on() -> None:
    gate = PoolGate(PoolLimits(per_host=1))
    assert gate.take("a")
    first = asyncio.create_task(gate.wait("a", 10))
    second = asyncio.create_task(gate.wait("a", 10))
    await asyncio.sleep(0)
    gate.give_back("a")  # handed to the first waiter, which is cancelled before it runs
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first
    assert await second and gate.in_use == 1


async def test_a_slot_freed_in_the_step_a_waiter_is_cancelled_skips_it() -> None:
    """A waiter's future is cancelled at once when its task is (by the caller, or by
    its wait running out), but it leaves the queue only at the task's next step: a slot
    given back in between must pass over it, not fail on its cancelled future
    (``InvalidStateError`` out of ``give_back``) and leave the slot held by nobody."""
    gate = PoolGate(PoolLimits(per_host=1))
    assert gate.take("a")
    cancelled = asyncio.create_task(gate.wait("a", 10))
    second = asyncio.create_task(gate.wait("a", 10))
    await asyncio.sleep(0)
    cancelled.cancel()
    gate.give_back("a")  # the same loop step: the cancelled waiter is still queued
    with pytest.raises(asyncio.CancelledError):
        await cancelled
    assert await second and gate.in_use == 1
    gate.give_back("a")
    assert gate.in_use == 0 and gate.take("a")


def test_the_pool_key_is_the_origin() -> None:
    assert origin_of("https://api.openai.com/v1/responses") == "https://api.openai.com"
    assert origin_of("http://127.0.0.1:8080/v1?x=1") == "http://127.0.0.1:8080"
    assert origin_of("http://host?x=/y") == "http://host"


def test_one_origin_however_its_url_is_written() -> None:
    """As aiohttp's connector keys its pool: a default port, case and user info do not
    make another origin (the gate counted ``https://h:443`` apart from ``https://h``)."""
    same = ("https://api.example.com/v1", "https://api.example.com:443/v1",
            "HTTPS://API.Example.com/v1", "https://user:pw@api.example.com/x#f")
    assert {origin_of(url) for url in same} == {"https://api.example.com"}
    assert origin_of("http://[::1]:8080/v1") == "http://[::1]:8080"
    assert origin_of("http://h:8080/") != origin_of("http://h/")


async def test_a_callers_session_is_not_gated() -> None:
    async with serve(Flaky()) as server, aiohttp.ClientSession() as session:
        transport = AiohttpTransport(session)
        await collect(transport, request_for(server))
        assert transport._gate is None and session.trace_configs == []


async def test_the_own_session_sends_no_cookie_back() -> None:
    """A provider's CDN sets cookies on every response (Cloudflare's ``__cf_bm``): the
    transport's own session neither parses them into a jar nor sends them back (the
    default jar cost ~0.1 ms per request with two such cookies); a caller's session
    keeps its own jar."""
    sent: list[str | None] = []

    async def handler(request: web.Request) -> web.StreamResponse:
        sent.append(request.headers.get("Cookie"))
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        response.set_cookie("__cf_bm", "abc", path="/", httponly=True)
        await response.prepare(request)
        await response.write(b"data: 1\n\n")
        await response.write_eof()
        return response

    async with serve(handler) as server:
        url = f"http://localhost:{server.port}/v1/stream"  # a host name: jars skip IPs
        async with AiohttpTransport() as transport:
            for _ in range(2):
                await collect(transport, request_for(url))
        async with aiohttp.ClientSession() as session:
            callers = AiohttpTransport(session)
            for _ in range(2):
                await collect(callers, request_for(url))
    assert sent == [None, None, None, "__cf_bm=abc"]


async def test_a_call_retrying_after_the_transport_closed_fails_as_a_provider_error() -> None:
    """``aclose()`` during a retry's back-off: the next attempt does not send on the
    closed session (aiohttp's bare ``RuntimeError``), nor open a session nobody closes;
    the call fails with a typed, transient error."""
    transport: AiohttpTransport

    async def closing_sleep(_: float) -> None:
        await transport.aclose()

    async with serve(Flaky(lambda: error(503))) as server:
        transport = AiohttpTransport(retry=RetryPolicy(max_attempts=3, base_delay=0.1),
                                     sleep=closing_sleep)
        with pytest.raises(TransientProviderError, match="transport was closed"):
            await collect(transport, request_for(server))
        assert transport._session is None
