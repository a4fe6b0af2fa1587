"""The aiohttp transport every provider shares: SSE streaming, timeouts, retries.

Theory of operation. ``AiohttpTransport.stream_batches`` sends one ``HttpRequest`` and
yields the response's server-sent events as ``SseDecoder`` completes them, a list per
network chunk (``stream``, the ``Transport`` method, yields them one by one). A
non-2xx answer is read (at most ``MAX_ERROR_BODY`` bytes) and handed to the adapter's
classifier, which turns status, headers and body into the typed ``ProviderError`` tree.
So is a 2xx answer whose ``Content-Type`` is JSON or HTML (a gateway's JSON error, or
the provider's, sent with 200) when it holds an error object; any other such body (a
non-streamed completion: a proxy dropped ``stream: true``) fails as a
``ProviderProtocolError`` naming its type. No ``Content-Type``, or any other one, is
read as the stream asked for; such a body of no event but a bare JSON error object
is classified too. Connection failures and timeouts become ``TransientProviderError``.

Retries follow one rule: a retryable error (``error.retryable``: 429, 5xx, 529,
connection loss, connect and idle timeouts) is retried with bounded, jittered
exponential backoff, or after the server's ``Retry-After`` (capped at
``RetryPolicy.max_retry_after``), until user-visible output has streamed. This
transport retries what fails before its first event; a failure after events is
raised, and ``provider_batches`` (which sees what the parser made of them) restarts
the call through ``before_restart`` when none of them was text, reasoning or a tool
call. Output the caller has seen cannot be taken back. Retries and restarts share one
budget per call (the request's ``AttemptBudget``): at most ``max_attempts`` requests in
all, however they fail.

Two timeouts: ``connect_timeout`` bounds establishing a new connection (not the wait
for a free one from the pool: ``PoolLimits.wait_seconds`` bounds that, and running out
is ``ProviderPoolExhausted``, through ``_pool.PoolGate``), ``idle_timeout`` bounds
every wait for bytes (each slice of a large request body, ``_request_body``; the response
head by aiohttp's ``sock_read``; each read of the body by the stream's one lazily re-armed
timer, ``_response_stream``). A stream that keeps sending never times out; one that goes
quiet does. Beside them, ``StreamLimits.max_stream_seconds`` bounds each attempt's whole
answer from its request sent: the head (``_head_watch.HeadWatch``, one timer for all
requests), an error body (``_transport_reads._within``) and the stream, so a server that
drips a byte just inside the idle timeout, forever, is ended (``StreamLimitExceeded``).

A finished stream's connection goes back to the pool. A call ends at its terminal
frame: ``provider_batches`` sends ``True`` into ``stream_batches`` once its parser is
done (``FINISHES_ON_SEND``). The end of the HTTP body may come after that frame, and
aiohttp pools a connection only once the body is read to its end, so what is left is
read then: at once when it is already in, else by a drain task the transport tracks,
within ``DrainLimits`` (seconds, bytes); past them, or on any failure, the connection is
closed. A call that stops before its terminal frame (failed, cancelled, abandoned)
closes its connection at once. ``aclose()`` cancels pending drains (their connections
closed) before it closes the session. How a request is sent and its response let go of is
``_transport_conn``'s ``TransportConnection``, a mixin of ``AiohttpTransport``.

Credentials: every error this module raises goes through the providers' one scrubber
(``_scrub``: the request's auth header values, configured keys and key shapes; classified
bodies included, in case a server echoes the key), errors
are raised outside the ``except`` blocks that caught aiohttp's exceptions (so no
``__context__`` carries request headers), and redirects are not followed (so an auth
header never travels to another host).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import aclosing
from types import TracebackType
from typing import ClassVar

import aiohttp

from turnstate.core._errors import (
    ProviderError,
    ProviderPoolExhausted,
    RateLimited,
    StreamLimitExceeded,
    TransientProviderError,
)
from turnstate.providers._errors import holds_error
from turnstate.providers._head_watch import HeadWatch
from turnstate.providers._pool import PoolGate, origin_of
from turnstate.providers._protocol import AttemptBudget, ErrorClassifier, HttpRequest, SseEvent
from turnstate.providers._response_stream import ResponseStream
from turnstate.providers._scrub import scrub_error, secrets_of
from turnstate.providers._sse import SseDecoder
from turnstate.providers._transport_conn import TransportConnection
from turnstate.providers._transport_reads import (
    _classified,
    _describe,
    _is_event_stream,
    _NoPooledConnection,
    _within,
)
from turnstate.providers._transport_settings import (
    DEFAULT_DRAIN_LIMITS,
    DEFAULT_POOL_LIMITS,
    DEFAULT_RETRY_POLICY,
    DEFAULT_STREAM_LIMITS,
    DrainLimits,
    PoolLimits,
    RetryPolicy,
    StreamLimits,
)

Sleep = Callable[[float], Awaitable[None]]


class AiohttpTransport(TransportConnection):
    """Streams SSE responses over one aiohttp ``ClientSession``.

    Args:
        session: a caller-owned session (never closed here). Without one, a session is
            created on first use and closed by ``aclose()`` / ``async with``; it keeps
            no cookies (pass a session for that).
        connect_timeout: seconds allowed to establish a connection.
        idle_timeout: seconds a write or read may wait (a large body's slices, the head,
            each read of the body; a consumer busy between reads is not timed out for it).
        retry: the retry policy for transient failures.
        sleep: awaited between attempts (tests inject one that records the delays).
        rng: the jitter's random source (seed it for reproducible delays).
        limits: the bounds of one response stream (``StreamLimits``).
        pool: the connection pool of the session created here (``PoolLimits``); a
            caller's session keeps its own connector.
        drain: how long and how much of a finished stream's leftover body is read so
            its connection is pooled (``DrainLimits``).
    """

    FINISHES_ON_SEND: ClassVar[bool] = True
    """``stream_batches`` takes ``True`` sent at a yield as "the call is complete": it
    stops reading and settles the connection (pooled once the body's end is read).
    ``provider_batches`` sends it only to a class that says so in its own body."""

    def __init__(
        self,
        session: aiohttp.ClientSession | None = None,
        *,
        connect_timeout: float = 10.0,
        idle_timeout: float = 60.0,
        retry: RetryPolicy = DEFAULT_RETRY_POLICY,
        sleep: Sleep = asyncio.sleep,
        rng: random.Random | None = None,
        limits: StreamLimits = DEFAULT_STREAM_LIMITS,
        pool: PoolLimits = DEFAULT_POOL_LIMITS,
        drain: DrainLimits = DEFAULT_DRAIN_LIMITS,
    ) -> None:
        self._session = session
        self.pool = pool
        self.limits = limits
        self._owns_session = session is None
        self.connect_timeout = connect_timeout
        self.idle_timeout = idle_timeout
        self.retry = retry
        self._sleep = sleep
        self._rng = rng if rng is not None else random.Random()
        self._timeouts: tuple[object, aiohttp.ClientTimeout] = ((), aiohttp.ClientTimeout())
        self.drain = drain
        self._drains: set[asyncio.Task[None]] = set()
        self._gate: PoolGate | None = None  # the own session's, made with it
        self._watch: HeadWatch | None = None  # the heads' deadlines, made on first use

    def __repr__(self) -> str:
        owner = "own session" if self._owns_session else "caller's session"
        return (f"AiohttpTransport({owner}, connect_timeout={self.connect_timeout}, "
                f"idle_timeout={self.idle_timeout})")

    async def __aenter__(self) -> AiohttpTransport:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Cancel the pending drains (their connections closed), then close the session
        if this transport created it; a caller's is left open."""
        if drains := self._drains:
            for task in drains:
                task.cancel()
            await asyncio.gather(*drains, return_exceptions=True)
        if self._owns_session and self._session is not None:
            session, self._session = self._session, None
            await session.close()

    def _session_for_request(self) -> aiohttp.ClientSession:
        if self._session is None:
            pool = self.pool
            connector = aiohttp.TCPConnector(limit=pool.total, limit_per_host=pool.per_host,
                                             keepalive_timeout=pool.keepalive_seconds)
            # No cookie jar: provider APIs authenticate by header, and the cookies their
            # CDNs set on every response (Cloudflare's ``__cf_bm``, ``_cfuvid``) cost a
            # parse per response and a filter per request, ~0.1 ms (issue 26).
            self._session = aiohttp.ClientSession(connector=connector,
                                                  cookie_jar=aiohttp.DummyCookieJar())
            self._gate = PoolGate(pool)
        return self._session

    async def stream(
        self, request: HttpRequest, classify: ErrorClassifier
    ) -> AsyncGenerator[SseEvent, None]:
        """Send ``request`` and yield its events, retrying only before the first one
        (``stream_batches``, one event at a time).

        Raises:
            ProviderError: as ``stream_batches``.
        """
        async with aclosing(self.stream_batches(request, classify)) as batches:
            async for batch in batches:
                for event in batch:
                    yield event

    async def stream_batches(
        self, request: HttpRequest, classify: ErrorClassifier
    ) -> AsyncGenerator[list[SseEvent], bool | None]:
        """Send ``request`` and yield its events as each chunk completes them (a
        non-empty list per chunk), retrying only before the first one.

        ``provider_batches`` reads these: one resumption per chunk rather than per event
        (issue 26). Each attempt runs inline in this one generator; aiohttp's exceptions
        leave an attempt only as a ``TransientProviderError``. ``True`` sent at a yield
        ends the stream there as complete: the generator returns and the connection is
        settled (``_settle``); closed instead, it closes the connection.

        Raises:
            ProviderError: the classified error of a non-2xx answer or of a 2xx one
                that is no event stream (``ProviderProtocolError`` if it holds no error
                object), or ``TransientProviderError`` for connection loss and
                timeouts, once retries are exhausted or output has streamed.
        """
        budget = request.budget if request.budget is not None else AttemptBudget()
        session = self._session_for_request()
        gate = self._gate
        origin = origin_of(request.url) if gate is not None else ""
        attempt = 0
        while True:
            attempt += 1
            budget.spend(self.retry.max_attempts)
            streamed = False
            failure: ProviderError | None = None
            retry_after: float | None = None
            self._check_open(session, request)
            deadline = asyncio.get_running_loop().time() + self.limits.max_stream_seconds
            try:
                response = await self._head(session, request, gate, origin, deadline)
                complete = False
                try:
                    head = None
                    if (200 <= response.status < 300
                            and _is_event_stream(response.headers.get("Content-Type"))):
                        stream = ResponseStream(
                            SseDecoder(max_line=self.limits.max_line_bytes), self.limits,
                            request.provider or "provider", response, self.idle_timeout,
                            deadline=deadline)
                        try:
                            while chunk := await self._read(stream):
                                if events := stream.decode(chunk):
                                    stream.progressed()
                                    streamed = True
                                    if (yield events):  # the caller's parser is done
                                        complete = True
                                        return
                        finally:
                            stream.stop()
                        # the body's end (an unfinished event dropped), or its bare error
                        if not holds_error(head := stream.head):
                            return
                    failure, retry_after = await _within(
                        deadline, _classified(response, classify, request.provider, head),
                        self.limits, request.provider, "the error body")
                finally:
                    await self._end(response, complete, gate, origin)
            except aiohttp.ConnectionTimeoutError:
                failure = self._transient(request,
                                          f"connect timeout after {self.connect_timeout}s")
            except TimeoutError as exc:
                failure = (self._pool_exhausted(request) if isinstance(exc, _NoPooledConnection)
                           else self._transient(request,
                                                f"no data for {self.idle_timeout}s (idle timeout)"))
            except aiohttp.ClientError as exc:
                failure = self._transient(request, _describe(request, exc))
            # Raised here, outside the except blocks: no __context__ links the error to
            # aiohttp's exceptions (some of which carry the request's headers).
            assert failure is not None  # a 2xx answer returned above
            scrub_error(failure, secrets_of(request.headers))  # only a failure needs them
            if (streamed or not failure.retryable or budget.exhausted
                    or isinstance(failure, ProviderPoolExhausted)  # it would only wait again
                    or budget.waits_past(  # the turn's deadline comes first: no retry
                        delay := self.retry.delay(attempt, retry_after, self._rng),
                        asyncio.get_running_loop().time())):
                raise failure
            await self._sleep(delay)

    async def _head(self, session: aiohttp.ClientSession, request: HttpRequest,
                    gate: PoolGate | None, origin: str, deadline: float,
                    ) -> aiohttp.ClientResponse:
        """``_send``, its head due by ``deadline`` (the ``HeadWatch``: one timer for all).

        Raises:
            StreamLimitExceeded: no whole head by then (``max_stream_seconds``).
        """
        loop, seconds = asyncio.get_running_loop(), self.limits.max_stream_seconds
        watch = self._watch
        if watch is None or watch.loop is not loop or watch.seconds != seconds:
            watch = self._watch = HeadWatch(loop, seconds)
        wait = watch.start(deadline)
        try:
            return await self._send(session, request, gate, origin)
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if not wait.expired or task is None or task.uncancel() > 0:
                raise  # the caller's cancel (too)
        finally:
            wait.done()
        raise StreamLimitExceeded(request.provider or "provider", "max_stream_seconds",
                                  f"the response head took longer than {seconds}s")

    def _check_open(self, session: aiohttp.ClientSession, request: HttpRequest) -> None:
        """Refuse an attempt on a session ``aclose()`` closed while the call waited to
        retry (aiohttp would raise a bare ``RuntimeError``).

        Raises:
            TransientProviderError: the transport was closed.
        """
        if session.closed:
            raise self._transient(request, "the transport was closed")

    async def before_restart(self, restarts: int, error: ProviderError) -> bool:
        """Allow the ``restarts``-th restart of a call whose stream failed with a
        retryable ``error`` before showing output, while the policy has attempts left
        (the first attempt counts); wait its backoff (or the error's ``Retry-After``)."""
        if restarts >= self.retry.max_attempts:
            return False
        retry_after = error.retry_after if isinstance(error, RateLimited) else None
        await self._sleep(self.retry.delay(restarts, retry_after, self._rng))
        return True

    async def _read(self, stream: ResponseStream) -> bytes:
        """The next chunk, before both limits (loop time).

        The idle timeout is the stream's one timer (``ResponseStream._check``), which
        fails a read that waited ``idle_timeout``; a limit gets a timer of its own only
        when it falls due before the idle timeout could.
        """
        stream.reading_since = now = stream.clock()
        limit_at = min(stream.deadline, stream.progress)
        if now + self.idle_timeout < limit_at:
            chunk = await stream.content.readany()  # IdleTimeout: transient
            stream.reading_since = None
            return chunk
        try:
            async with asyncio.timeout_at(limit_at) as scope:
                chunk = await stream.content.readany()
                stream.reading_since = None
                return chunk
        except TimeoutError:
            if not scope.expired():  # the idle timeout came first
                raise
        limits, provider = self.limits, stream.provider
        if stream.progress < stream.deadline:
            raise StreamLimitExceeded(provider, "max_event_gap_seconds",
                                      f"no complete event for {limits.max_event_gap_seconds}s")
        raise StreamLimitExceeded(provider, "max_stream_seconds",
                                  f"the stream ran longer than {limits.max_stream_seconds}s")

    def _pool_exhausted(self, request: HttpRequest) -> ProviderPoolExhausted:
        return ProviderPoolExhausted(
            request.provider or "provider",
            f"no pooled connection came free in {self.pool.wait_seconds}s "
            f"(PoolLimits: {self.pool.per_host} per host, {self.pool.total or 'no'} total)")

    def _transient(self, request: HttpRequest, detail: str) -> TransientProviderError:
        return TransientProviderError(request.provider or "provider", detail)
