"""SSE frames of engine events, and a writer that sends a burst of them as one write.

The engine often yields several events in one step of the handler's task (a state
change, then a text delta; the context snapshot, two state changes and the final event
around the commit). Writing each one flushes a chunk and costs a socket send (which on
loopback also wakes the reader); ``EventWriter`` buffers the frames of one step and
writes them together once the task yields to the event loop, so a stream is never held
back by more than the step that produced it. A write still in progress (a slow client,
above the transport's high-water mark) holds the next event back: backpressure reaches
the engine as before. The response headers go out with the first burst, and the final
event's burst with the end of the chunked body, so a cursor turn on the emulators takes
three writes where it took eleven (headers, nine events, the end).
"""

from __future__ import annotations

import asyncio
import contextlib

from aiohttp import web
from aiohttp_sse import EventSourceResponse

from turnstate.core._event_json import event_json
from turnstate.core._events import TurnEvent
from turnstate.storage._records import utf8_safe
from turnstate.storage._turn_log import LoggedEvent

SEND_TIMEOUT_SECONDS = 120.0
"""A write that does not finish within this aborts the connection (a stalled client)."""


def logged_frame(entry: LoggedEvent) -> bytes:
    """One SSE event of a turn's numbered events: its id, its type, its JSON data (with
    half a surrogate pair ASCII-escaped, as ``sse_frame`` does)."""
    frame = f"id: {entry.id}\nevent: {entry.type}\ndata: {entry.data}\n\n"
    try:
        return frame.encode()
    except UnicodeEncodeError:
        data = utf8_safe(entry.data)
        return f"id: {entry.id}\nevent: {entry.type}\ndata: {data}\n\n".encode()


def sse_frame(event: TurnEvent) -> bytes:
    """One SSE event: named by the event's ``type``, its JSON (one line) as ``data``.

    A provider may split a surrogate pair across two text deltas (each half alone is not
    encodable as UTF-8). Such a frame falls back to ASCII-escaped JSON: the halves travel
    as ``\\ud83d`` escapes, and a client that joins the deltas gets the character back.
    """
    try:
        return f"event: {event.type}\ndata: {event_json(event)}\n\n".encode()
    except UnicodeEncodeError:
        return f"event: {event.type}\ndata: {event_json(event, ascii_only=True)}\n\n".encode()


class TurnStream(EventSourceResponse):
    """An SSE response whose headers wait for the first body bytes (one send for both).

    ``_send_headers_immediately`` is aiohttp's own switch (``web.Response`` turns it off
    the same way); were it ever gone, the headers would simply go out on their own.
    """

    _send_headers_immediately = False


class EventWriter:
    """Buffers SSE frames and writes each burst in one chunk from a flush task."""

    def __init__(self, response: web.StreamResponse, request: web.Request, *,
                 send_timeout: float = SEND_TIMEOUT_SECONDS) -> None:
        self._response, self._request, self._timeout = response, request, send_timeout
        self._frames: list[bytes] = []
        self._flush: asyncio.Task[None] | None = None
        self._writing = False
        self.writes = 0

    async def send(self, event: TurnEvent) -> None:
        """Queue the event's frame; waits only while an earlier write is in progress."""
        await self.send_frame(sse_frame(event))

    async def send_frame(self, frame: bytes) -> None:
        """Queue one SSE frame (see ``send``)."""
        if self._writing and self._flush is not None:
            await asyncio.shield(self._flush)
        if self._flush is not None and self._flush.done():
            self._flush.result()  # a failed write (the client went away) surfaces here
            self._flush = None
        self._frames.append(frame)
        if self._flush is None:
            self._flush = asyncio.ensure_future(self._write())

    async def drain(self) -> None:
        """Wait until every queued frame is written (raises what a write raised)."""
        if self._flush is not None:
            await self._flush

    async def finish(self, event: TurnEvent) -> None:
        """Write the queued frames and ``event``'s, with the end of the body, at once."""
        await self.finish_frame(sse_frame(event))

    async def finish_frame(self, frame: bytes) -> None:
        """Write the queued frames and ``frame``, with the end of the body, at once."""
        if self._flush is not None:
            if self._writing:
                await asyncio.shield(self._flush)
            elif not self._flush.done():
                self._flush.cancel()  # not started: its frames are still queued here
            elif not self._flush.cancelled():
                self._flush.result()
            self._flush = None
        self._frames.append(frame)
        data = b"".join(self._frames)
        self._frames.clear()
        try:
            async with asyncio.timeout(self._timeout):
                await self._response.write_eof(data)
        except TimeoutError:
            self._abort()
            raise
        self.writes += 1

    def cancel(self) -> None:
        if self._flush is not None and not self._flush.done():
            self._flush.cancel()

    async def _write(self) -> None:
        while self._frames:
            data = b"".join(self._frames)
            self._frames.clear()
            self._writing = True
            try:
                async with asyncio.timeout(self._timeout):
                    await self._response.write(data)
            except TimeoutError:
                self._abort()
                raise
            finally:
                self._writing = False
            self.writes += 1

    def _abort(self) -> None:
        transport = self._request.transport
        if transport is not None:
            with contextlib.suppress(Exception):
                transport.abort()
