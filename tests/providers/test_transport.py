"""The aiohttp transport against real servers on 127.0.0.1: streaming, retries, timeouts."""

from __future__ import annotations

import asyncio
import contextlib
import random
import socket
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping
from typing import Any

import aiohttp
import attrs
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from tests.providers.support import Sleeps
from turnstate.core._errors import (
    FatalProviderError,
    ProviderError,
    RateLimited,
    TransientProviderError,
)
from turnstate.providers import HttpRequest, SseEvent, _boundary, _transport
from turnstate.providers._errors import error_fields, status_error
from turnstate.providers._protocol import ErrorClassifier
from turnstate.providers._transport import AiohttpTransport, RetryPolicy
from turnstate.providers._transport_reads import MAX_ERROR_BODY

SECRET = "sk-test-SECRET-0123456789abcdef"
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def classify(status: int, headers: Mapping[str, str], body: bytes) -> ProviderError:
    fields = error_fields(body)
    return status_error("test", status, headers, str(fields.get("message", "")),
                        fields.get("code"))


@contextlib.asynccontextmanager
async def serve(handler: Handler) -> AsyncIterator[TestServer]:
    async def route(request: web.Request) -> web.StreamResponse:
        return await handler(request)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", route)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    try:
        yield server
    finally:
        await server.close()


def request_for(server: TestServer | str, path: str = "/v1/stream") -> HttpRequest:
    url = server if isinstance(server, str) else str(server.make_url(path))
    return HttpRequest(method="POST", url=url, body=b'{"hello":"world"}', provider="test",
                       headers={"authorization": f"Bearer {SECRET}",
                                "content-type": "application/json"})


async def collect(transport: AiohttpTransport, request: HttpRequest) -> list[SseEvent]:
    return [event async for event in transport.stream(request, classify)]


async def sse(request: web.Request, *frames: bytes) -> web.StreamResponse:
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await response.prepare(request)
    for frame in frames:
        await response.write(frame)
    await response.write_eof()
    return response


def error(status: int, message: str = "boom", headers: Mapping[str, str] | None = None,
          ) -> web.Response:
    return web.json_response({"error": {"message": message, "code": f"e{status}"}},
                             status=status, headers=headers)


class Flaky:
    """Answers with the queued error responses first, then with a short SSE stream."""

    def __init__(self, *failures: Callable[[], web.Response]) -> None:
        self.failures = list(failures)
        self.attempts = 0
        self.bodies: list[bytes] = []
        self.auth: list[str] = []

    async def __call__(self, request: web.Request) -> web.StreamResponse:
        self.attempts += 1
        self.bodies.append(await request.read())
        self.auth.append(request.headers.get("Authorization", ""))
        if self.failures:
            return self.failures.pop(0)()
        return await sse(request, b"event: a\ndata: 1\n\n", b"data: 2\n\n")


def transport_with(sleeps: Sleeps, **kw: Any) -> AiohttpTransport:
    policy = kw.pop("retry", RetryPolicy(max_attempts=3, base_delay=0.1, max_delay=1.0))
    return AiohttpTransport(retry=policy, sleep=sleeps, rng=random.Random(7), **kw)


# --- streaming -----------------------------------------------------------------------


async def test_streams_events_across_chunks() -> None:
    """Events split across network writes arrive whole and in order; the request arrives
    as built."""
    received: list[tuple[bytes, str]] = []

    async def split(request: web.Request) -> web.StreamResponse:
        received.append((await request.read(), request.headers.get("Authorization", "")))
        return await sse(request, b"event: first\nda", b"ta: one\n\ndata: t", b"wo\n\n")

    async with serve(split) as server, transport_with(Sleeps()) as transport:
        events = await collect(transport, request_for(server))
    assert events == [SseEvent(event="first", data="one"), SseEvent(data="two")]
    assert received == [(b'{"hello":"world"}', f"Bearer {SECRET}")]


async def test_batches_hand_over_each_chunks_events_at_once(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``stream_batches`` yields one list per chunk that completed events (the events
    ``stream`` yields one by one), so its reader resumes it per chunk (issue 26)."""
    completed: list[int] = []

    class Counting(_transport.SseDecoder):
        def feed(self, chunk: bytes) -> list[SseEvent]:
            events = super().feed(chunk)
            if events:
                completed.append(len(events))
            return events

    monkeypatch.setattr(_transport, "SseDecoder", Counting)
    frames = [b"data: %d\n\n" % i for i in range(12)]

    async def handler(request: web.Request) -> web.StreamResponse:
        return await sse(request, b"".join(frames[:8]), b"".join(frames[8:]))

    async with serve(handler) as server, transport_with(Sleeps()) as transport:
        batches = [batch async for batch in
                   transport.stream_batches(request_for(server), classify)]
        sizes = list(completed)
        one_by_one = await collect(transport, request_for(server))
    assert [len(batch) for batch in batches] == sizes
    assert len(batches) <= 2  # two writes of a few dozen bytes: one or two chunks
    assert [event for batch in batches for event in batch] == one_by_one
    assert [event.data for event in one_by_one] == [str(i) for i in range(12)]


async def test_a_subclass_that_overrides_stream_alone_is_read_through_it() -> None:
    """The boundary reads ``stream_batches`` only from a class that defines ``stream``
    too: a subclass that changes ``stream`` (here: tagging each event) is never
    bypassed, even when it changes ``stream_batches`` as well; one whose ``stream`` is
    its own batches' flattening is read in batches."""

    class Tagging(AiohttpTransport):
        async def stream(self, request: HttpRequest, classify: ErrorClassifier
                         ) -> AsyncGenerator[SseEvent, None]:
            async for event in super().stream(request, classify):
                yield attrs.evolve(event, event="tagged")

    class Batches(Tagging):  # stream_batches changed, stream still Tagging's
        async def stream_batches(self, request: HttpRequest, classify: ErrorClassifier
                                 ) -> AsyncGenerator[list[SseEvent], None]:
            async for batch in super().stream_batches(request, classify):
                yield [attrs.evolve(event, event="batched") for event in batch]

    class Both(Batches):  # stream is the flattening of its own stream_batches again
        stream = AiohttpTransport.stream

    async def handler(request: web.Request) -> web.StreamResponse:
        return await sse(request, b"data: 1\n\ndata: 2\n\n")

    seen: dict[str, list[str]] = {}
    async with serve(handler) as server:
        for transport in (Tagging(retry=RetryPolicy(max_attempts=1)),
                          Batches(retry=RetryPolicy(max_attempts=1)),
                          Both(retry=RetryPolicy(max_attempts=1))):
            async with transport:
                batches = _boundary._sse_batches(transport, request_for(server), classify,
                                                   _boundary._reading(type(transport)))
                seen[type(transport).__name__] = [
                    event.event async for batch in batches for event in batch]
    assert seen == {"Tagging": ["tagged", "tagged"], "Batches": ["tagged", "tagged"],
                    "Both": ["batched", "batched"]}


async def test_consumer_may_stop_early() -> None:
    """Closing the stream after the first event releases it; the transport stays usable."""
    async with serve(Flaky()) as server, transport_with(Sleeps()) as transport:
        stream = transport.stream(request_for(server), classify)
        first = await anext(stream)
        await stream.aclose()
        again = await collect(transport, request_for(server))
    assert first.data == "1"
    assert [e.data for e in again] == ["1", "2"]


async def test_own_session_is_created_lazily_and_closed() -> None:
    """Without a session the transport makes one on first use and closes it in aclose."""
    transport = AiohttpTransport()
    assert transport._session is None
    async with serve(Flaky()) as server:
        await collect(transport, request_for(server))
        session = transport._session
        assert session is not None and not session.closed
        await transport.aclose()
    assert session.closed and transport._session is None


async def test_callers_session_is_never_closed() -> None:
    """A session handed in stays open after aclose and after ``async with``."""
    async with aiohttp.ClientSession() as session, serve(Flaky()) as server:
        async with AiohttpTransport(session) as transport:
            await collect(transport, request_for(server))
        await transport.aclose()
        assert not session.closed


# --- retries -------------------------------------------------------------------------


async def test_transient_errors_are_retried_with_jittered_backoff() -> None:
    """Two 500s then success: three attempts, two backoffs within their jitter bands."""
    handler = Flaky(lambda: error(500), lambda: error(503))
    sleeps = Sleeps()
    policy = RetryPolicy(max_attempts=3, base_delay=0.2, max_delay=1.0, jitter=0.5)
    async with serve(handler) as server, transport_with(sleeps, retry=policy) as transport:
        events = await collect(transport, request_for(server))
    assert [e.data for e in events] == ["1", "2"]
    assert handler.attempts == 3
    assert 0.1 <= sleeps.delays[0] <= 0.2
    assert 0.2 <= sleeps.delays[1] <= 0.4
    check = random.Random(7)
    assert sleeps.delays == [policy.backoff(1, check), policy.backoff(2, check)]


async def test_backoff_is_capped_by_max_delay() -> None:
    """Doubling stops at ``max_delay``."""
    handler = Flaky(*[lambda: error(502)] * 4)
    sleeps = Sleeps()
    policy = RetryPolicy(max_attempts=5, base_delay=1.0, max_delay=2.5, jitter=0.0)
    async with serve(handler) as server, transport_with(sleeps, retry=policy) as transport:
        await collect(transport, request_for(server))
    assert sleeps.delays == [1.0, 2.0, 2.5, 2.5]


async def test_529_is_retried() -> None:
    """An overloaded 529 counts as transient."""
    handler = Flaky(lambda: error(529))
    async with serve(handler) as server, transport_with(Sleeps()) as transport:
        await collect(transport, request_for(server))
    assert handler.attempts == 2


async def test_retry_after_is_honoured() -> None:
    """A 429's Retry-After replaces the backoff."""
    handler = Flaky(lambda: error(429, headers={"Retry-After": "3"}))
    sleeps = Sleeps()
    async with serve(handler) as server, transport_with(sleeps) as transport:
        await collect(transport, request_for(server))
    assert sleeps.delays == [3.0]


async def test_retry_after_on_503_is_honoured() -> None:
    """A 503 with Retry-After waits as long as the server asks."""
    handler = Flaky(lambda: error(503, headers={"Retry-After": "2"}))
    sleeps = Sleeps()
    async with serve(handler) as server, transport_with(sleeps) as transport:
        await collect(transport, request_for(server))
    assert sleeps.delays == [2.0]


async def test_retry_after_is_capped() -> None:
    """A Retry-After beyond ``max_retry_after`` is waited for only that long."""
    handler = Flaky(lambda: error(429, headers={"Retry-After": "86400"}))
    sleeps = Sleeps()
    policy = RetryPolicy(max_retry_after=30.0)
    async with serve(handler) as server, transport_with(sleeps, retry=policy) as transport:
        await collect(transport, request_for(server))
    assert sleeps.delays == [30.0]


async def test_exhausted_retries_raise_the_last_error() -> None:
    """After max_attempts transient failures the classified error is raised."""
    handler = Flaky(*[lambda: error(429, "slow down", {"Retry-After": "1"})] * 5)
    sleeps = Sleeps()
    async with serve(handler) as server, transport_with(sleeps) as transport:
        with pytest.raises(RateLimited) as caught:
            await collect(transport, request_for(server))
    assert handler.attempts == 3 and len(sleeps.delays) == 2
    assert caught.value.status == 429 and caught.value.retry_after == 1.0
    assert caught.value.detail == "slow down"


async def test_fatal_errors_are_not_retried() -> None:
    """A 400 is raised at once, with the body's message."""
    handler = Flaky(lambda: error(400, "bad request"))
    sleeps = Sleeps()
    async with serve(handler) as server, transport_with(sleeps) as transport:
        with pytest.raises(FatalProviderError) as caught:
            await collect(transport, request_for(server))
    assert handler.attempts == 1 and sleeps.delays == []
    assert caught.value.status == 400 and caught.value.detail == "bad request"


async def test_redirects_are_not_followed() -> None:
    """A redirect is an error answer: the auth header never travels elsewhere."""
    hits: list[str] = []

    async def handler(request: web.Request) -> web.StreamResponse:
        hits.append(request.path)
        if request.path == "/v1/stream":
            raise web.HTTPTemporaryRedirect("/elsewhere")
        return await sse(request, b"data: x\n\n")

    async with serve(handler) as server, transport_with(Sleeps()) as transport:
        with pytest.raises(FatalProviderError) as caught:
            await collect(transport, request_for(server))
    assert hits == ["/v1/stream"] and caught.value.status == 307


async def test_error_bodies_are_read_up_to_the_limit() -> None:
    """A huge error body reaches the classifier cut at ``MAX_ERROR_BODY`` bytes."""
    seen: list[int] = []

    def measuring(status: int, headers: Mapping[str, str], body: bytes) -> ProviderError:
        seen.append(len(body))
        return classify(status, headers, body)

    async def handler(request: web.Request) -> web.StreamResponse:
        return web.Response(status=400, body=b"x" * (MAX_ERROR_BODY + 4096))

    async with serve(handler) as server, transport_with(Sleeps()) as transport:
        with pytest.raises(FatalProviderError):
            await anext(aiter(transport.stream(request_for(server), measuring)))
    assert seen == [MAX_ERROR_BODY]


# --- failures mid-stream and timeouts ------------------------------------------------


class Dropping:
    """Sends one event, waits until the test has seen it, then drops the connection."""

    def __init__(self) -> None:
        self.seen = asyncio.Event()
        self.attempts = 0

    async def __call__(self, request: web.Request) -> web.StreamResponse:
        self.attempts += 1
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await response.write(b"data: partial\n\n")
        await self.seen.wait()
        assert request.transport is not None
        request.transport.close()
        return response


async def test_no_retry_once_an_event_was_yielded() -> None:
    """A connection lost after output is raised as transient, never retried."""
    handler = Dropping()
    sleeps = Sleeps()
    events: list[str] = []
    async with serve(handler) as server, transport_with(sleeps) as transport:
        with pytest.raises(TransientProviderError) as caught:
            async for event in transport.stream(request_for(server), classify):
                events.append(event.data)
                handler.seen.set()
    assert events == ["partial"]
    assert handler.attempts == 1 and sleeps.delays == []
    assert "lost" in caught.value.detail


class Stalling:
    """Sends the response head (and optionally one event), then goes quiet until released."""

    def __init__(self, first: bytes | None) -> None:
        self.first = first
        self.release = asyncio.Event()
        self.attempts = 0

    async def __call__(self, request: web.Request) -> web.StreamResponse:
        self.attempts += 1
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        if self.first is not None:
            await response.write(self.first)
        await self.release.wait()
        return response


async def test_idle_timeout_mid_stream_is_transient_and_not_retried() -> None:
    """A stream that stops sending after output fails after ``idle_timeout``."""
    handler = Stalling(b"data: one\n\n")
    sleeps = Sleeps()
    events: list[str] = []
    async with serve(handler) as server:
        try:
            async with transport_with(sleeps, idle_timeout=0.05) as transport:
                with pytest.raises(TransientProviderError) as caught:
                    async for event in transport.stream(request_for(server), classify):
                        events.append(event.data)
        finally:
            handler.release.set()
    assert events == ["one"] and handler.attempts == 1 and sleeps.delays == []
    assert "idle timeout" in caught.value.detail


async def test_idle_timeout_before_output_is_retried() -> None:
    """A server that sends nothing after the head is retried: no output was seen yet."""
    handler = Stalling(None)
    sleeps = Sleeps()
    async with serve(handler) as server:
        try:
            async with transport_with(sleeps, idle_timeout=0.05) as transport:
                with pytest.raises(TransientProviderError):
                    await collect(transport, request_for(server))
        finally:
            handler.release.set()
    assert handler.attempts == 3 and len(sleeps.delays) == 2


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


async def test_connection_refused_is_retried_then_raised() -> None:
    """Nothing listening: every attempt fails to connect, then a transient error."""
    sleeps = Sleeps()
    url = f"http://127.0.0.1:{free_port()}/v1/stream"
    async with transport_with(sleeps) as transport:
        with pytest.raises(TransientProviderError) as caught:
            await collect(transport, request_for(url))
    assert len(sleeps.delays) == 2
    assert "cannot connect to 127.0.0.1" in caught.value.detail


class TimeoutConnector(aiohttp.TCPConnector):
    """A connector whose connection attempts time out (no real unroutable host needed)."""

    attempts = 0

    async def connect(self, *args: Any, **kwargs: Any) -> Any:
        TimeoutConnector.attempts += 1
        msg = f"Connection timeout to host with Bearer {SECRET}"
        raise aiohttp.ConnectionTimeoutError(msg)


async def test_connect_timeout_is_retried() -> None:
    """A connect timeout is transient and retried; its message is the transport's own."""
    sleeps = Sleeps()
    TimeoutConnector.attempts = 0
    async with aiohttp.ClientSession(connector=TimeoutConnector()) as session:
        transport = transport_with(sleeps, session=session, connect_timeout=0.5)
        with pytest.raises(TransientProviderError) as caught:
            await collect(transport, request_for("http://127.0.0.1:9/v1"))
    assert TimeoutConnector.attempts == 3 and len(sleeps.delays) == 2
    assert caught.value.detail == "connect timeout after 0.5s"


# --- credentials ---------------------------------------------------------------------


def chain(error: BaseException) -> list[BaseException]:
    found: list[BaseException] = []
    current: BaseException | None = error
    while current is not None and current not in found:
        found.append(current)
        current = current.__cause__ or current.__context__
    return found


def assert_no_secret(error: BaseException) -> None:
    for link in chain(error):
        for text in (str(link), repr(link), *map(str, link.args)):
            assert SECRET not in text
            assert SECRET[3:] not in text
        if isinstance(link, ProviderError):
            assert SECRET not in link.detail


def echo_key(request: web.Request, status: int) -> web.Response:
    key = request.headers.get("Authorization", "")
    return web.json_response({"error": {"message": f"Incorrect API key provided: {key}"}},
                             status=status)


@pytest.mark.parametrize("status", [401, 429, 500])
async def test_key_echoed_in_an_error_body_is_scrubbed(status: int) -> None:
    """A server that echoes the key in its error body does not leak it into errors."""
    async def handler(request: web.Request) -> web.StreamResponse:
        return echo_key(request, status)

    async with serve(handler) as server, transport_with(Sleeps()) as transport:
        with pytest.raises(ProviderError) as caught:
            await collect(transport, request_for(server))
    assert_no_secret(caught.value)
    assert "<redacted>" in caught.value.detail


async def test_no_failure_path_leaks_the_key() -> None:
    """Mid-stream loss, idle timeout, refused and timed-out connections: no key anywhere."""
    errors: list[BaseException] = []
    dropping, stalling = Dropping(), Stalling(None)
    async with serve(dropping) as server, transport_with(Sleeps()) as transport:
        with pytest.raises(ProviderError) as caught:
            async for _ in transport.stream(request_for(server), classify):
                dropping.seen.set()
        errors.append(caught.value)
    async with serve(stalling) as server:
        try:
            async with transport_with(Sleeps(), idle_timeout=0.05) as transport:
                with pytest.raises(ProviderError) as caught:
                    await collect(transport, request_for(server))
                errors.append(caught.value)
        finally:
            stalling.release.set()
    async with transport_with(Sleeps()) as transport:
        with pytest.raises(ProviderError) as caught:
            await collect(transport, request_for(f"http://127.0.0.1:{free_port()}/x"))
        errors.append(caught.value)
    async with aiohttp.ClientSession(connector=TimeoutConnector()) as session:
        with pytest.raises(ProviderError) as caught:
            await collect(transport_with(Sleeps(), session=session), request_for("http://h/x"))
        errors.append(caught.value)
    assert len(errors) == 4
    for failure in errors:
        assert_no_secret(failure)


def test_repr_holds_no_credentials() -> None:
    """Neither the request nor the transport prints headers."""
    assert SECRET not in repr(request_for("http://127.0.0.1:1/x"))
    assert SECRET not in repr(AiohttpTransport())


# --- the policy ----------------------------------------------------------------------


def test_backoff_stays_within_its_band() -> None:
    """Every jittered wait lies in [ceiling * (1 - jitter), ceiling]."""
    policy = RetryPolicy(base_delay=0.5, max_delay=4.0, jitter=0.3)
    rng = random.Random(1)
    for attempt in range(1, 8):
        ceiling = min(4.0, 0.5 * 2 ** (attempt - 1))
        for _ in range(50):
            assert ceiling * 0.7 <= policy.backoff(attempt, rng) <= ceiling


def test_policy_refuses_nonsense() -> None:
    """Zero attempts or a jitter outside [0, 1] are configuration mistakes."""
    with pytest.raises(ValueError, match="max_attempts"):
        RetryPolicy(max_attempts=0)
    with pytest.raises(ValueError, match="jitter"):
        RetryPolicy(jitter=1.5)
    assert attrs.evolve(RetryPolicy(), max_attempts=1).max_attempts == 1
