"""One streamed response as ``AiohttpTransport`` reads it: the SSE decoder, the stream
limits, and the one timer of the idle timeout.

The idle timeout bounds every wait for bytes. aiohttp's ``sock_read`` bounds the wait for
the response head; for the body it would cancel and re-arm a timer for every chunk
received (about 10 µs a chunk, issue 26), so the transport turns it off once the head is
in (``take_idle_timeout``) and the stream keeps one timer instead, armed once and moved
on lazily: when it fires, it fails the read in progress if that read has waited
``idle`` seconds, and otherwise re-arms for when the read in progress (or, with none, a
read starting now) would run out. A read counts from its start (``reading_since``), so,
as before, a consumer that is busy between reads is never timed out for it.

Until its first event, the stream keeps the bytes it read (up to ``MAX_HEAD``): a 2xx
``text/event-stream`` answer whose body is a bare JSON error object (no ``data:``
framing; some gateways answer so) decodes to no event, and the transport classifies
``head`` instead of losing the provider's message.
"""

from __future__ import annotations

import asyncio

import aiohttp

from turnstate.core._errors import StreamLimitExceeded
from turnstate.providers._protocol import SseEvent
from turnstate.providers._sse import SseDecoder, SseLimitExceeded
from turnstate.providers._transport_settings import StreamLimits

EARLY = 0.001
"""A timer may fire this early (seconds) and still count as due: the loop runs a handle
up to its clock's resolution before its time."""


MAX_HEAD = 1 << 16
"""Bytes kept before the first event, for an unframed error body."""


class IdleTimeout(TimeoutError):
    """A read of the body waited ``idle_timeout`` seconds for a byte."""


def take_idle_timeout(response: aiohttp.ClientResponse) -> bool:
    """Turn aiohttp's ``sock_read`` off for the rest of ``response`` (and drop the timer
    the head's bytes armed); whether the body is still to come, so the stream's own
    timer is needed (a body already in whole, or a detached connection, needs none)."""
    if response.content.is_eof():
        return False
    connection = response.connection
    protocol = connection.protocol if connection is not None else None
    if protocol is None:
        return False
    protocol.read_timeout = None
    protocol.start_timeout()  # with no read timeout: cancels the armed timer, sets none
    return True


class ResponseStream:
    """One response's SSE decoder and the limits it is held to (loop time):
    ``max_stream_bytes``, the decoder's line limits, ``max_stream_seconds`` (the
    deadline) and ``max_event_gap_seconds`` (``progress``, moved on by every event);
    and, while the body is still to come, the idle timer over its reads."""

    __slots__ = ("_head", "_loop", "_timer", "clock", "content", "deadline", "decoder",
                 "idle", "limits", "progress", "provider", "reading_since", "size")

    def __init__(self, decoder: SseDecoder, limits: StreamLimits, provider: str,
                 response: aiohttp.ClientResponse, idle: float, *,
                 deadline: float | None = None) -> None:
        self.limits, self.provider = limits, provider
        self.decoder = decoder
        self._loop = loop = asyncio.get_running_loop()
        self.clock = loop.time
        now = self.clock()
        # the attempt's (from its request sent), else from now
        self.deadline = now + limits.max_stream_seconds if deadline is None else deadline
        self.progress = now + limits.max_event_gap_seconds
        self.size = 0
        self.content, self.idle = response.content, idle
        self.reading_since: float | None = None
        self._head: list[bytes] | None = []  # None once an event came or past MAX_HEAD
        self._timer: asyncio.TimerHandle | None = None
        if take_idle_timeout(response):  # the body is still to come: watch its reads
            self._timer = loop.call_at(now + idle, self._check)

    def stop(self) -> None:
        """The stream is done with: no timer left behind."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _check(self) -> None:
        now = self.clock()
        since = self.reading_since
        due = now + self.idle if since is None else since + self.idle
        if since is not None and due - now < EARLY:
            self._timer = None
            self.content.set_exception(IdleTimeout(f"no data for {self.idle}s"))
            return
        self._timer = self._loop.call_at(due, self._check)

    def decode(self, chunk: bytes) -> list[SseEvent]:
        """The events ``chunk`` completed.

        Raises:
            StreamLimitExceeded: the stream outgrew ``max_stream_bytes``, or a line or
                an event outgrew ``max_line_bytes``.
        """
        self.size += len(chunk)
        if self.size > self.limits.max_stream_bytes:
            raise StreamLimitExceeded(self.provider, "max_stream_bytes",
                                      f"more than {self.limits.max_stream_bytes} bytes")
        if self._head is not None:
            self._head.append(chunk)
        try:
            events = self.decoder.feed(chunk)
        except SseLimitExceeded as exc:
            raise StreamLimitExceeded(self.provider, exc.limit,
                                      f"more than {exc.size} characters") from None
        if self._head is not None and (events or self.size > MAX_HEAD):
            self._head = None
        return events

    @property
    def head(self) -> bytes:
        """The body read so far while it held no event and ``MAX_HEAD`` bytes at most
        (empty once it did)."""
        return b"".join(self._head) if self._head is not None else b""

    def progressed(self) -> None:
        """Events arrived (a chunk's worth): the gap allowed until the next one starts
        again."""
        self.progress = self.clock() + self.limits.max_event_gap_seconds
