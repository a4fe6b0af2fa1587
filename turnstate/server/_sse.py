"""SSE frames of engine events, and the stream that sends a turn's batches of them.

A stream follows a turn's numbered events in batches: each batch is what the turn had
published when the stream last looked (``LiveTurn.follow_batches``, or one read of the
log), and goes out as one chunk, one socket send, so a burst of events (a state change
then a delta; the context snapshot, two state changes and the final event around the
commit) costs one write; a long batch (a resume of a long log) goes in slices
(``slices``). The headers wait for the first batch, and the final event's batch goes
with the end of the chunked body. A write still in progress (a slow client,
above the transport's high-water mark) holds the next batch back; one that does not
finish within ``SEND_TIMEOUT_SECONDS`` aborts the connection, and the kernel aborts it
when sent data stays unacknowledged that long (``TCP_USER_TIMEOUT``, set when the
heartbeat first comes due: see ``TurnStream.open``). While nothing else goes out for
``heartbeat_seconds``, a ``: ping`` comment does, from a timer (no task per stream).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import socket
from collections.abc import Iterator, Mapping, Sequence

from aiohttp import HttpVersion11, web

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


def logged_frames(batch: Sequence[LoggedEvent]) -> bytes:
    """A batch's SSE events as one chunk: their text joined, then encoded once (a bytes
    object per event and their join cost more, issue 26); ``logged_frame``'s escaping
    when a data line holds half a surrogate pair."""
    text = "".join([f"id: {entry.id}\nevent: {entry.type}\ndata: {entry.data}\n\n"
                    for entry in batch])
    try:
        return text.encode()
    except UnicodeEncodeError:
        return b"".join(map(logged_frame, batch))


SLICE_CHARS = 64 * 1024
"""The most event data one write of a stream carries (``slices``), one event at least."""


def slices(batch: tuple[LoggedEvent, ...]) -> Iterator[tuple[LoggedEvent, ...]]:
    """``batch`` in runs of whole events whose data add up to at most ``SLICE_CHARS``
    (one event alone may hold more), each made into frames only once the one before was
    written (a write waits while the socket's buffer is full). A batch is everything
    since the stream last looked: a resume from 0 of a long turn (its whole log, MiBs),
    or what a live turn published while a slow reader's write waited; sent as one chunk,
    its frames sat whole in the socket's buffer, however slowly the client read, for up
    to the send timeout (64 stalled resumes of a 3.5 MB log held +278 MiB)."""
    size = 0
    for entry in batch:
        size += len(entry.data)
    if size <= SLICE_CHARS:  # nearly every batch: one write
        yield batch
        return
    start = size = 0
    for end, entry in enumerate(batch):
        if size and size + len(entry.data) > SLICE_CHARS:
            yield batch[start:end]
            start, size = end, 0
        size += len(entry.data)
    yield batch[start:]


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


SSE_HEADERS = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache",
               "Connection": "keep-alive", "X-Accel-Buffering": "no",
               "X-Content-Type-Options": "nosniff", "Server": "turnstate"}
"""The last two are what the application's prepare hook gives every ``/api`` answer
(``_app._page_headers``), set here so that the hook can skip a turn's stream."""
PING = b": ping\n\n"
_FRAMING_BYTES = 8192
"""Room left for what a write adds to its data: the headers (with the first batch) and
the chunk framing."""
_TCP_USER_TIMEOUT = getattr(socket, "TCP_USER_TIMEOUT", None)


class TurnStream(web.StreamResponse):
    """An SSE response of batches of frames (see the module docstring).

    ``_send_headers_immediately`` is aiohttp's own switch (``web.Response`` turns it off
    the same way): the headers go out with the first batch, in one send; were it ever
    gone, the headers would simply go out on their own. Over HTTP/1.0 (no chunked
    encoding) the body ends where the connection does, so the answer says ``Connection:
    close`` and closes it, whatever keep-alive the client asked for.
    """

    _send_headers_immediately = False

    def __init__(self, request: web.Request, *, headers: Mapping[str, str],
                 heartbeat_seconds: float, send_timeout: float = SEND_TIMEOUT_SECONDS,
                 first_pings: FirstPings | None = None) -> None:
        """``first_pings`` (of period ``heartbeat_seconds``) is the server's; without it
        the stream has one of its own."""
        super().__init__(headers={**SSE_HEADERS, **headers})
        if request.version < HttpVersion11:  # no chunks: the body ends with the connection
            self.force_close()  # (aiohttp drops keep-alive for it only in a local)
            self.headers["Connection"] = "close"
        self._first_pings = first_pings or FirstPings(heartbeat_seconds)
        self._request, self._timeout, self._heartbeat = request, send_timeout, heartbeat_seconds
        self._loop = asyncio.get_running_loop()
        self._last_write = self._loop.time()
        self._ping_timer: asyncio.TimerHandle | None = None
        self._ping: asyncio.Task[None] | None = None
        self._socket: socket.socket | None = None
        self._kernel_timeout_due = True  # TCP_USER_TIMEOUT not yet looked at
        self._first_ping: list[TurnStream | None] | None = None  # its ticket in FirstPings

    async def open(self) -> None:
        """Prepare the response (the headers wait for the first batch) and arm the
        heartbeat.

        The kernel gives up on a peer that acknowledges nothing for the send timeout
        (``TCP_USER_TIMEOUT``). It counts from the first unacknowledged send whenever the
        option is set, so setting it when the heartbeat first comes due (before the send
        timeout could have run out) aborts a dead peer just as early; a turn that ends
        sooner, nearly every one, then costs no ``setsockopt`` at all (two system calls
        per turn before, issue 26). A heartbeat that may come due after the send timeout
        (``FirstPings``' lateness included) sets it now.

        The first heartbeat is armed in the loop's ``FirstPings`` (no timer of its own).
        """
        await self.prepare(self._request)  # chunked on HTTP/1.1 (no length), as aiohttp does
        if self._heartbeat * (1 + _FIRST_PING_LATENESS) >= self._timeout:
            self._limit_unacknowledged()
        self._first_ping = self._first_pings.add(self)

    def _limit_unacknowledged(self) -> None:
        """Set ``TCP_USER_TIMEOUT`` to the send timeout on a TCP connection (its
        address is a tuple; a Unix socket's is a string); once per stream."""
        self._kernel_timeout_due = False
        transport = self._request.transport
        if _TCP_USER_TIMEOUT is None or transport is None or transport.is_closing() \
                or not isinstance(transport.get_extra_info("sockname"), tuple):
            return
        sock = transport.get_extra_info("socket")
        if sock is None or sock.fileno() < 0:
            return
        with contextlib.suppress(OSError):  # the peer went away meanwhile: nothing to limit
            sock.setsockopt(socket.IPPROTO_TCP, _TCP_USER_TIMEOUT, int(self._timeout * 1000))
            self._socket = sock

    async def send(self, data: bytes) -> None:
        """Write one batch's frames as one chunk."""
        self._last_write = self._loop.time()
        if self._fits(data):
            await self.write(data)
            return
        try:
            async with asyncio.timeout(self._timeout):
                await self.write(data)
        except TimeoutError:
            self._abort()
            raise

    async def finish(self, data: bytes) -> None:
        """Write the last batch with the end of the body, then ``close``."""
        self._last_write = self._loop.time()
        self.close()
        if self._fits(data):
            await self.write_eof(data)
            return
        try:
            async with asyncio.timeout(self._timeout):
                await self.write_eof(data)
        except TimeoutError:
            self._abort()
            raise

    def _fits(self, data: bytes) -> bool:
        """Whether the stream is not paused and ``data`` (with the headers and chunk
        framing) fits below the transport's high-water mark: the write then cannot pause
        it, so it cannot wait, and needs no timer (a timeout's timer costs a heap entry
        and a cancel per write). A stream paused above the high mark stays paused until
        the buffer is down to the low one (and aiohttp's writer waits on it), so the
        buffer must be at most the low mark. A transport that cannot say gets the
        timeout."""
        transport = self._request.transport
        try:
            low, high = transport.get_write_buffer_limits()  # type: ignore[union-attr]
            queued = transport.get_write_buffer_size()  # type: ignore[union-attr]
        except (AttributeError, NotImplementedError):
            return False
        return queued <= low and queued + len(data) + _FRAMING_BYTES <= high

    def close(self) -> None:
        """Stop the heartbeat and give the connection its kernel default back (it may
        carry other requests)."""
        if self._first_ping is not None:
            self._first_ping[0] = None  # FirstPings holds no closed stream
            self._first_ping = None
        if self._ping_timer is not None:
            self._ping_timer.cancel()
            self._ping_timer = None
        if self._ping is not None:
            self._ping.cancel()
            self._ping = None
        sock, self._socket = self._socket, None
        if sock is not None and _TCP_USER_TIMEOUT is not None and sock.fileno() >= 0:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, _TCP_USER_TIMEOUT, 0)

    def _ping_due(self) -> None:
        if self._kernel_timeout_due:
            self._limit_unacknowledged()
        due = self._last_write + self._heartbeat
        if self._loop.time() < due:  # something went out meanwhile: wait from there
            self._ping_timer = self._loop.call_at(due, self._ping_due)
        else:
            self._ping_timer = None
            self._ping = asyncio.ensure_future(self._send_ping())

    async def _send_ping(self) -> None:
        try:
            await self.send(PING)
        except (ConnectionResetError, RuntimeError, TimeoutError):
            return  # the stream is over (RuntimeError: written after its end)
        self._ping = None
        self._ping_timer = self._loop.call_at(self._last_write + self._heartbeat,
                                              self._ping_due)

    def _abort(self) -> None:
        transport = self._request.transport
        if transport is not None:
            with contextlib.suppress(Exception):
                transport.abort()


_FIRST_PING_LATENESS = 0.1
"""How late, as a share of the heartbeat, ``FirstPings`` may call a stream's first one."""


class FirstPings:
    """The first heartbeat of every stream of one period, from one timer (one per server:
    ``Services.first_pings``).

    Each stream armed a timer of its own at open and cancelled it at close: a timer
    handle and a heap push per turn, and a cancelled entry left in the loop's heap for
    the whole period (thousands at a few hundred turns a second, which every timer of
    the loop then sifts past), for a turn that nearly always ends before its first
    heartbeat (issue 26). Streams of one period open in time order, so their first due
    times come in that order: a queue, and one timer for its head, at most a tenth of the
    period late (so it fires at most ten times a period), which calls each due stream's
    ``_ping_due`` (its later heartbeats run on its own timer, as before). A stream is
    held through a ticket that its ``close`` empties, so the queue keeps no closed stream
    alive.
    """

    def __init__(self, period: float) -> None:
        self.period = period
        self.loop: asyncio.AbstractEventLoop | None = None
        self.queue: collections.deque[tuple[float, list[TurnStream | None]]] = \
            collections.deque()
        self.timer: asyncio.TimerHandle | None = None

    def add(self, stream: TurnStream) -> list[TurnStream | None]:
        """Queue ``stream``'s first heartbeat; its ticket (``close`` empties it)."""
        loop = asyncio.get_running_loop()
        if loop is not self.loop:  # a server started again on another loop
            self.loop, self.queue, self.timer = loop, collections.deque(), None
        ticket: list[TurnStream | None] = [stream]
        self.queue.append((stream._last_write + self.period, ticket))
        if self.timer is None:
            self.timer = loop.call_at(self.queue[0][0], self._fire)
        return ticket

    def _fire(self) -> None:
        assert self.loop is not None
        now = self.loop.time()
        while self.queue and self.queue[0][0] <= now:
            stream = self.queue.popleft()[1][0]
            if stream is not None:
                stream._ping_due()
        self.timer = None if not self.queue else self.loop.call_at(
            max(self.queue[0][0], now + self.period * _FIRST_PING_LATENESS), self._fire)
