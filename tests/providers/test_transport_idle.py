"""The idle timeout's one timer per stream (issue 26, fourth pass): aiohttp's ``sock_read``
bounds the head, then the stream's own timer bounds its reads, armed once and moved on
lazily, instead of a timer cancelled and re-armed for every chunk (aiohttp's, and before
that the transport's ``asyncio.timeout`` per read as well)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from aiohttp import web

from tests.providers.test_transport import classify, request_for, serve
from turnstate.providers._response_stream import EARLY, IdleTimeout, ResponseStream
from turnstate.providers._sse import SseDecoder
from turnstate.providers._transport import AiohttpTransport, RetryPolicy
from turnstate.providers._transport_settings import StreamLimits

CHUNKS = 20


class Paced:
    """Writes one event, then waits for the client to have read it before the next: each
    event is its own network chunk."""

    def __init__(self) -> None:
        self.read = asyncio.Event()

    async def __call__(self, request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for index in range(CHUNKS):
            self.read.clear()
            await response.write(b"data: %d\n\n" % index)
            await self.read.wait()
        await response.write_eof()
        return response


def client_timers(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the client's read timers each time one is armed: aiohttp's
    ``sock_read``, an ``asyncio.timeout`` and the stream's own."""
    armed: list[str] = []
    loop = asyncio.get_running_loop()
    real: Callable[..., asyncio.TimerHandle] = loop.call_at

    def call_at(when: float, callback: Callable[..., Any], *args: Any,
                **kw: Any) -> asyncio.TimerHandle:
        name = getattr(callback, "__qualname__", "")
        if name in ("ResponseHandler._on_read_timeout", "Timeout._on_timeout",
                    "ResponseStream._check"):
            armed.append(name)
        return real(when, callback, *args, **kw)

    monkeypatch.setattr(loop, "call_at", call_at)
    return armed


async def test_a_stream_of_many_chunks_arms_its_idle_timer_once(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """20 chunks: the stream's timer is armed once, when the head is in; reading the
    chunks arms no timer at all (main armed aiohttp's ``sock_read`` and an
    ``asyncio.timeout`` for every chunk: 38 between the first and the last)."""
    handler = Paced()
    async with serve(handler) as server, \
            AiohttpTransport(retry=RetryPolicy(max_attempts=1)) as transport:
        armed = client_timers(monkeypatch)
        data: list[str] = []
        at_first = at_last = 0
        async for batch in transport.stream_batches(request_for(server), classify):
            data += [event.data for event in batch]
            at_first, at_last = at_first or len(armed), len(armed)
            handler.read.set()
    assert data == [str(index) for index in range(CHUNKS)]
    assert armed[:at_first].count("ResponseStream._check") == 1
    assert armed[at_first:at_last] == []


class Content:
    """The stream's view of a response body: not at its end; records a failed read."""

    def __init__(self) -> None:
        self.failed: list[BaseException] = []

    def is_eof(self) -> bool:
        return False

    def set_exception(self, exc: BaseException) -> None:
        self.failed.append(exc)


class Response:
    """A response whose head is in and whose connection is detached (no aiohttp timer
    to take over, so the stream arms none: the test drives ``_check`` itself)."""

    def __init__(self) -> None:
        self.content = Content()
        self.connection = None


async def test_the_idle_timer_fails_only_a_read_that_waited_the_idle_timeout() -> None:
    """A consumer busy between reads is never timed out for it; a read is, once it has
    waited ``idle`` seconds; a timer that fires before then moves on to when the read
    in progress would run out."""
    response = Response()
    stream = ResponseStream(SseDecoder(), StreamLimits(), "test", response, 5.0)  # type: ignore[arg-type]
    assert stream._timer is None
    now = 100.0
    stream.clock = lambda: now
    stream.reading_since = None
    stream._check()  # the consumer has the stream: nothing fails, the timer moves on
    assert response.content.failed == [] and stream._timer is not None
    assert stream._timer.when() == 105.0
    stream.reading_since = 103.0
    now = 105.0
    stream.stop()  # the loop ran the timer (it calls _check), not the test
    stream._check()  # this read has waited 2 s of 5
    assert response.content.failed == [] and stream._timer.when() == 108.0
    now = 108.0 - EARLY / 2  # the loop may run a timer a hair early
    stream.stop()
    stream._check()
    (failure,) = response.content.failed
    assert isinstance(failure, IdleTimeout) and isinstance(failure, TimeoutError)
    assert stream._timer is None
    stream.stop()
