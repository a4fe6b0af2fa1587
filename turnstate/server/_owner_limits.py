"""How much of one node an owner may hold at once: open streams and running turns.

Without a bound, one token opened streams (a turn's, a resume's, a UI stream's) or
started detached turns (each on a new chat, its client gone at once) by the thousand:
every stream a task and a socket, every turn a provider request, until the process ran
out of file descriptors for everyone. ``OwnerLimits`` counts both per owner on this
node; past ``ServerConfig.max_streams_per_owner`` or ``max_turns_per_owner`` the request
is refused with ``429`` (``too_many_streams`` / ``too_many_turns``, ``Retry-After``)
before a turn is started or a stream opened. A count is two dict operations a request.

A turn whose body is larger than ``max_body_bytes`` (its images and PDFs inline: up to
``max_content_bytes``) holds one of the owner's ``max_large_bodies_per_owner`` slots from
before its body is read to the turn's end (``large_body``): such a turn held about
90 MiB of the process's memory while it ran (155 MiB at its peak for a 20 MiB image),
and 32 of them from one token took the process from 130 MiB to 2.9 GiB.

An answer larger than ``LARGE_ANSWER_BYTES`` (an image or PDF a user attached, a long
chat's ``ui-messages``) is a stream too while it is sent (``large_answers``): it holds
one of the owner's streams and must be taken within ``SEND_TIMEOUT_SECONDS``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from typing import Any

from aiohttp import web

from turnstate.server._http import OWNER, RETRY_AFTER_SECONDS, ApiError, Handler
from turnstate.server._sse import SEND_TIMEOUT_SECONDS


def _too_many(error: str, message: str) -> ApiError:
    return ApiError(429, error, message, headers={"Retry-After": str(RETRY_AFTER_SECONDS)})


def _too_many_streams(limit: int) -> ApiError:
    return _too_many("too_many_streams", f"at most {limit} streams may be open at once "
                     "per owner; close one or try again shortly")


def _too_many_turns(limit: int) -> ApiError:
    return _too_many("too_many_turns", f"at most {limit} turns may run at once per "
                     "owner; wait for one to end")


def _too_many_large(limit: int) -> ApiError:
    return _too_many("too_many_large_bodies", f"at most {limit} turns with large bodies "
                     "(inline images and files) may be read or run at once per owner; "
                     "wait for one to end")


class OwnerLimits:
    """Per-owner counts of the open streams, running turns and large turn bodies of this
    node."""

    def __init__(self, max_streams: int, max_turns: int, max_large: int = 2) -> None:
        self.max_streams, self.max_turns, self.max_large = max_streams, max_turns, max_large
        self.streams: dict[str, int] = {}
        self.turns: dict[str, int] = {}
        self.large: dict[str, int] = {}
        self.large_turns: dict[str, str] = {}  # turn id -> owner, until the turn ends

    @contextlib.contextmanager
    def stream(self, owner: str) -> Iterator[None]:
        """Hold one of ``owner``'s streams while the block runs (429 past the limit)."""
        count = self.streams.get(owner, 0)
        if count >= self.max_streams:
            raise _too_many_streams(self.max_streams)
        self.streams[owner] = count + 1
        try:
            yield
        finally:
            _drop(self.streams, owner)

    def take_turn(self, owner: str) -> None:
        """Count a turn about to start (429 past the limit); ``turn_ended`` gives it back."""
        count = self.turns.get(owner, 0)
        if count >= self.max_turns:
            raise _too_many_turns(self.max_turns)
        self.turns[owner] = count + 1

    def turn_ended(self, owner: str) -> None:
        _drop(self.turns, owner)

    @contextlib.contextmanager
    def large_body(self, owner: str, large: bool) -> Iterator[LargeSlot | None]:
        """Hold one of ``owner``'s large-body slots while the block runs, when ``large``
        (429 ``too_many_large_bodies`` past the limit); a turn the block starts takes the
        slot on to its end (``LargeSlot.hand_to``, ``large_turn_ended``)."""
        if not large:
            yield None
            return
        count = self.large.get(owner, 0)
        if count >= self.max_large:
            raise _too_many_large(self.max_large)
        self.large[owner] = count + 1
        slot = LargeSlot(self, owner)
        try:
            yield slot
        finally:
            if slot.turn_id is None:
                _drop(self.large, owner)

    def large_turn_ended(self, turn_id: str) -> None:
        """Give back the large-body slot a turn held, if it held one."""
        owner = self.large_turns.pop(turn_id, None)
        if owner is not None:
            _drop(self.large, owner)


class LargeSlot:
    """One held large-body slot, handed to the turn that carries the body."""

    def __init__(self, limits: OwnerLimits, owner: str) -> None:
        self.limits, self.owner = limits, owner
        self.turn_id: str | None = None

    def hand_to(self, turn_id: str) -> None:
        """The turn ``turn_id`` holds the slot until it ends (before it starts: a turn
        that ends at once gives it back itself)."""
        self.turn_id = turn_id
        self.limits.large_turns[turn_id] = self.owner

    def take_back(self) -> None:
        """The turn did not start: the block gives the slot back when it ends."""
        if self.turn_id is not None:
            self.limits.large_turns.pop(self.turn_id, None)
            self.turn_id = None


def _drop(counts: dict[str, int], owner: str) -> None:
    count = counts.get(owner, 0) - 1
    if count > 0:
        counts[owner] = count
    else:
        counts.pop(owner, None)



LARGE_ANSWER_BYTES = 64 * 1024
"""An answer body above this is sent inside the handler, as a stream (asyncio's write
buffer holds up to 64 KiB before a write waits for the peer)."""
MIN_SEND_BYTES_PER_SECOND = 32 * 1024
"""The slowest client a large answer waits for, beyond ``SEND_TIMEOUT_SECONDS``: a
20 MiB image may take 120 + 640 s."""


def large_answers(limits: OwnerLimits, send_timeout: float = SEND_TIMEOUT_SECONDS,
                  min_rate: float = MIN_SEND_BYTES_PER_SECOND,
                  writes: frozenset[Handler] = frozenset()) -> Any:
    """Send an owner's answer larger than ``LARGE_ANSWER_BYTES`` (an image or PDF a user
    attached, a long chat's ``ui-messages``) holding one of the owner's streams (429
    ``too_many_streams`` when none is free); abort the connection when the client has
    not taken it within ``send_timeout`` plus its size at ``min_rate``, and close it
    after the answer. aiohttp writes a handler's answer after the handler with no
    timeout, and a keep-alive connection holds its last answer until its next request:
    a client that asked for a 20 MiB image and read nothing held its bytes in the
    process as long as it kept the connection, uncounted.

    The handlers in ``writes`` change something and may answer large (an edit's or a
    delete's chat view): they take the stream before they run, so their 429 means
    nothing was done (taken after, it came for a delete already made, and the retry it
    invites deleted again: attack8)."""

    @web.middleware
    async def large(request: web.Request, handler: Handler) -> web.StreamResponse:
        owner = request.get(OWNER)
        if owner is not None and request.match_info.handler in writes:
            with limits.stream(owner):
                return await _send(request, await handler(request), send_timeout, min_rate)
        response = await handler(request)
        if owner is None or _large_size(response) is None:
            return response
        with limits.stream(owner):
            return await _send(request, response, send_timeout, min_rate)

    return large


def _large_size(response: web.StreamResponse) -> int | None:
    """The size of an answer not yet sent whose body is larger than
    ``LARGE_ANSWER_BYTES``; None for any other answer."""
    if type(response) is not web.Response or response.prepared:
        return None
    body = response.body
    if not isinstance(body, bytes | bytearray) or len(body) <= LARGE_ANSWER_BYTES:
        return None
    return len(body)


async def _send(request: web.Request, response: web.StreamResponse, send_timeout: float,
                min_rate: float) -> web.StreamResponse:
    """A large answer sent now (the caller holds a stream), within its time; any other
    answer as it is."""
    size = _large_size(response)
    if size is None:
        return response
    response.force_close()  # a kept-alive connection would keep the body
    try:
        async with asyncio.timeout(send_timeout + size / min_rate):
            await response.prepare(request)
            await response.write_eof()
    except TimeoutError:  # the bytes it did not take go with the connection
        if request.transport is not None:
            request.transport.abort()
    except ConnectionError:  # the client left: aiohttp writes nothing more
        pass
    return response
