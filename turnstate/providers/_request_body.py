"""A large request body written in slices, each within the idle timeout (attack3).

aiohttp arms a request's read timeout (``sock_read``, the transport's ``idle_timeout``)
only once the whole body is written, and writing has no timeout of its own: a server
(or a proxy before it) that accepts the connection but never reads made a request
larger than the socket buffers (a chat replayed with its images, a few MB) wait in
``drain`` forever, holding the turn and its chat. ``request_data`` hands aiohttp such a
body as ``PacedBody``, whose slices must each leave within ``idle_timeout``: a peer
that takes no bytes for that long fails the request with ``TimeoutError``, which the
transport reads as the idle timeout (transient, retried like a silent answer). A body
the socket takes at once (``PACED_ABOVE`` bytes or fewer) is passed as it is.
"""

from __future__ import annotations

import asyncio

from aiohttp.abc import AbstractStreamWriter
from aiohttp.payload import BytesPayload

PACED_ABOVE = 64 << 10
"""Bodies up to this many bytes are written at once (aiohttp drains only past 64 KiB)."""
SLICE = 64 << 10


class PacedBody(BytesPayload):
    """``value`` written ``SLICE`` bytes at a time, each write (and the drain aiohttp
    makes it wait for) given ``idle_timeout`` seconds. Its size is the body's, so the
    request keeps its ``Content-Length``."""

    def __init__(self, value: bytes, idle_timeout: float, content_type: str) -> None:
        super().__init__(value, content_type=content_type)
        self._body = value
        self._idle_timeout = idle_timeout

    async def write(self, writer: AbstractStreamWriter) -> None:
        await self.write_with_length(writer, None)

    async def write_with_length(self, writer: AbstractStreamWriter,
                                content_length: int | None) -> None:
        body = memoryview(self._body)
        if content_length is not None:
            body = body[:content_length]
        for start in range(0, len(body), SLICE):
            async with asyncio.timeout(self._idle_timeout):  # TimeoutError: the peer took none
                await writer.write(body[start:start + SLICE])


def request_data(body: bytes, idle_timeout: float, content_type: str | None
                 ) -> bytes | PacedBody:
    """What ``session.request`` sends: ``body`` itself, or past ``PACED_ABOVE`` bytes a
    ``PacedBody`` of it."""
    if len(body) <= PACED_ABOVE:
        return body
    return PacedBody(body, idle_timeout, content_type or "application/json")
