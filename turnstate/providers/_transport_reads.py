"""The transport's response helpers: bounded reads, the background drain of a response
left unread, error bodies classified, and the names of a request's failures."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Mapping
from typing import TypeVar

import aiohttp
from yarl import URL

from turnstate.core._errors import (
    ProviderError,
    ProviderProtocolError,
    RateLimited,
    StreamLimitExceeded,
)
from turnstate.providers._errors import holds_error, parse_retry_after
from turnstate.providers._pool import PoolGate
from turnstate.providers._protocol import ErrorClassifier, HttpRequest
from turnstate.providers._transport_settings import DrainLimits, StreamLimits

T = TypeVar("T")

MAX_ERROR_BODY = 1 << 20
"""Error bodies are read up to this many bytes; the rest is dropped unread."""


async def _read_limited(content: aiohttp.StreamReader, limit: int) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while size < limit:
        chunk = await content.read(limit - size)
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


async def _drain(response: aiohttp.ClientResponse, limits: DrainLimits) -> None:
    """Read a complete call's leftover body to its end within ``limits``: the
    connection is then pooled; past a bound, or on any failure, it is closed."""
    content = response.content
    size = 0
    pooled = False
    try:
        async with asyncio.timeout(limits.seconds):
            while chunk := await content.readany():
                size += len(chunk)
                if size > limits.max_bytes:
                    break
            else:
                pooled = True
    except Exception:  # a timeout, a lost connection: nothing to pool, nothing to report
        pass
    finally:
        if pooled:
            response.release()
        else:
            response.close()


def _drained(drains: set[asyncio.Task[None]], response: aiohttp.ClientResponse,
             gate: PoolGate | None, origin: str, task: asyncio.Task[None]) -> None:
    """A drain ended: forget it; one cancelled before it ran closes its connection. The
    connection released or closed, its pool slot is given back."""
    drains.discard(task)
    if task.cancelled():
        response.close()
    if gate is not None:
        gate.give_back(origin)


def _describe(request: HttpRequest, exc: aiohttp.ClientError) -> str:
    """A connection failure in words that hold no URL query, header or body."""
    url = URL(request.url)
    where = f"{url.host}:{url.port}" if url.host else "the server"
    if isinstance(exc, aiohttp.ClientConnectorError):
        return f"cannot connect to {where} ({type(exc).__name__})"
    if isinstance(exc, aiohttp.ServerDisconnectedError | aiohttp.ClientPayloadError):
        return f"connection to {where} lost while reading ({type(exc).__name__})"
    return f"request to {where} failed ({type(exc).__name__})"


async def _classified(response: aiohttp.ClientResponse, classify: ErrorClassifier,
                      provider: str | None, body: bytes | None = None,
                      ) -> tuple[ProviderError, float | None]:
    """A non-2xx answer's typed error and the server's retry hint; or those of a 2xx
    answer that is no event stream but holds an error object (a gateway's, or the
    provider's own sent with 200), or of an event stream whose ``body`` (already read)
    held no event but a bare JSON error object. Any other such 2xx body (a non-streamed
    completion, a proxy's page) is a protocol error naming its content type."""
    if body is None:
        body = await _read_limited(response.content, MAX_ERROR_BODY)
    headers = {key: value for key, value in response.headers.items()}
    if 200 <= response.status < 300 and not holds_error(body):
        content_type = response.headers.get("Content-Type", "")
        return ProviderProtocolError(
            provider or "provider",
            f"expected text/event-stream, got {content_type!r} ({len(body)} bytes read): "
            "not a stream and not an error (a non-streamed response?)",
            status=response.status), None
    failure = classify(response.status, headers, body)
    return failure, _retry_after(failure, headers)


def _is_event_stream(content_type: str | None) -> bool:
    """Whether a 2xx answer is read as the event stream the request asked for: unless
    its ``Content-Type`` says JSON (``application/json``, ``...+json``) or an HTML page,
    any case, any parameters. No ``Content-Type`` at all, or another one (some servers
    label their event streams ``text/plain``), is read as before, not refused."""
    if content_type is None or content_type == "text/event-stream":  # the usual answer
        return True
    kind = content_type.partition(";")[0].strip().lower()
    return not (kind == "application/json" or kind.endswith("+json") or kind == "text/html")


def _retry_after(error: ProviderError, headers: Mapping[str, str]) -> float | None:
    """The server's ``Retry-After`` for a retryable error (a 503 may send one too)."""
    if isinstance(error, RateLimited) and error.retry_after is not None:
        return error.retry_after
    return parse_retry_after(headers) if error.retryable else None


class _NoPooledConnection(TimeoutError):
    """No slot of the own session's pool came free within ``PoolLimits.wait_seconds``
    (becomes ``ProviderPoolExhausted``)."""


async def _within(deadline: float, awaitable: Awaitable[T], limits: StreamLimits,
                  provider: str | None, what: str) -> T:
    """``awaitable`` (the response head, an error body) before the attempt's
    ``max_stream_seconds`` ``deadline`` (loop time). The idle timeout bounds each wait for
    a byte; a server that drips one byte a little faster than that, forever, is ended
    here (it held the turn, and its chat's lease, without end).

    Raises:
        StreamLimitExceeded: naming ``max_stream_seconds`` (never retried).
    """
    try:
        async with asyncio.timeout_at(deadline) as scope:
            return await awaitable
    except TimeoutError:
        if not scope.expired():  # the idle timeout, or the pool's wait
            raise
    raise StreamLimitExceeded(provider or "provider", "max_stream_seconds",
                              f"{what} took longer than {limits.max_stream_seconds}s")
