"""The settings of ``AiohttpTransport``: stream limits, the pool (its bounded wait is
``_pool.PoolGate``), the drain of a finished stream, retries."""

from __future__ import annotations

import random

import attrs


@attrs.frozen(kw_only=True)
class StreamLimits:
    """What one response stream may take; crossing a limit raises ``StreamLimitExceeded``
    naming it (the turn aborts ``provider_failed``), never retried.

    Attributes:
        max_stream_seconds: one attempt's whole answer, from its request sent: the
            response head, an error body and the event stream (default 10 minutes). The
            idle timeout bounds each wait for a byte; this ends a server that drips
            bytes just inside it, forever.
        max_stream_bytes: bytes read from one response (default 64 MiB).
        max_line_bytes: one SSE line, and one event's data (default 4 MiB; counted in
            decoded characters, which never exceed the bytes).
        max_event_gap_seconds: the longest time without a complete event. Bytes reset
            the idle timeout, but comment-only keepalives and a line that never ends do
            not count as progress (default 2 minutes).
    """

    max_stream_seconds: float = attrs.field(default=600.0, validator=attrs.validators.gt(0))
    max_stream_bytes: int = attrs.field(default=64 << 20, validator=attrs.validators.gt(0))
    max_line_bytes: int = attrs.field(default=4 << 20, validator=attrs.validators.gt(0))
    max_event_gap_seconds: float = attrs.field(default=120.0,
                                               validator=attrs.validators.gt(0))


DEFAULT_STREAM_LIMITS = StreamLimits()


@attrs.frozen(kw_only=True)
class PoolLimits:
    """The connection pool of the session a transport creates itself.

    Every streaming call holds one connection for its whole stream, so a chat server
    needs about as many connections to a provider's host as it runs turns at once.
    aiohttp's default (100 connections in all) made the 101st concurrent stream wait,
    and the wait counted against the connect timeout.

    Attributes:
        per_host: connections to one host (scheme, host and port); default 1,000.
        total: connections in all; 0 (the default) for no limit beyond ``per_host``.
        keepalive_seconds: how long an idle connection is kept for reuse.
        wait_seconds: the longest a request waits for a free connection (default 30 s);
            then it fails with ``ProviderPoolExhausted`` (retryable, not retried by the
            transport) without being sent.

    A call beyond the limit waits for a free connection; that wait is bounded by
    ``wait_seconds``, not by ``connect_timeout``, which covers only establishing a new
    connection. A caller's session has no such hook: there the wait and the connection
    together get ``wait_seconds + connect_timeout``, and running out is a connect timeout.
    """

    per_host: int = attrs.field(default=1000, validator=attrs.validators.ge(0))
    total: int = attrs.field(default=0, validator=attrs.validators.ge(0))
    keepalive_seconds: float = attrs.field(default=30.0, validator=attrs.validators.gt(0))
    wait_seconds: float = attrs.field(default=30.0, validator=attrs.validators.gt(0))


DEFAULT_POOL_LIMITS = PoolLimits()


@attrs.frozen(kw_only=True)
class DrainLimits:
    """How long a finished stream's leftover body is read so its connection can go back
    to the pool.

    A call ends at its terminal frame (``response.completed``, ``message_stop``,
    ``[DONE]``); the end of the HTTP body (the chunked terminator) may come a moment
    later. aiohttp pools a connection only once its body is read to the end, so the
    transport reads what is left in the background, within these bounds, then releases
    the connection; past either bound, or on any failure, it closes the connection.
    Without this every such call cost the next one a new connection (over TLS, a
    handshake: several ms and much CPU).

    Attributes:
        seconds: the longest a finished stream's remainder is waited for (default 2 s).
        max_bytes: the most bytes read from it (default 64 KiB).
    """

    seconds: float = attrs.field(default=2.0, validator=attrs.validators.gt(0))
    max_bytes: int = attrs.field(default=64 << 10, validator=attrs.validators.ge(0))


DEFAULT_DRAIN_LIMITS = DrainLimits()


@attrs.frozen(kw_only=True)
class RetryPolicy:
    """How transient failures are retried before any output has streamed.

    Attributes:
        max_attempts: requests per provider call in total, the first included, over
            the transport's retries and the restarts of a stream that showed no output
            (1 disables both).
        base_delay: the first backoff in seconds, doubled on every further retry.
        max_delay: upper bound of any computed backoff.
        jitter: the fraction of a backoff that is randomised away: the wait is
            ``backoff * (1 - jitter * u)`` with ``u`` uniform in [0, 1), so waits stay
            within ``[backoff * (1 - jitter), backoff]``.
        max_retry_after: the longest ``Retry-After`` honoured (seconds); a longer one
            is waited for only this long.
    """

    max_attempts: int = attrs.field(default=3, validator=attrs.validators.ge(1))
    base_delay: float = attrs.field(default=0.5, validator=attrs.validators.ge(0))
    max_delay: float = attrs.field(default=8.0, validator=attrs.validators.ge(0))
    jitter: float = attrs.field(
        default=0.25, validator=[attrs.validators.ge(0), attrs.validators.le(1)]
    )
    max_retry_after: float = attrs.field(default=60.0, validator=attrs.validators.ge(0))

    def backoff(self, attempt: int, rng: random.Random) -> float:
        """The jittered wait after failed attempt ``attempt`` (1-based)."""
        ceiling = min(self.max_delay, self.base_delay * 2.0 ** (attempt - 1))
        return ceiling * (1.0 - self.jitter * rng.random())

    def delay(
        self, attempt: int, retry_after: float | None, rng: random.Random
    ) -> float:
        """The wait before the next attempt: ``Retry-After`` (capped) wins over backoff."""
        if retry_after is not None:
            return min(retry_after, self.max_retry_after)
        return self.backoff(attempt, rng)


DEFAULT_RETRY_POLICY = RetryPolicy()
