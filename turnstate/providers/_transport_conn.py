"""The connections of ``AiohttpTransport`` (``_transport``): a request sent once the pool
gave its origin a slot, its timeouts, and a response let go of (settled, drained or
released) so its connection is pooled or closed.

``TransportConnection`` is ``AiohttpTransport``'s connection half (a mixin: the
transport's pool, drain limits, timeouts and drain tasks are its state), kept apart so
the streaming and retry loop of ``stream_batches`` reads on its own.
"""

from __future__ import annotations

import asyncio
from functools import partial

import aiohttp

from turnstate.providers._pool import PoolGate
from turnstate.providers._protocol import HttpRequest
from turnstate.providers._request_body import request_data
from turnstate.providers._transport_reads import _drain, _drained, _NoPooledConnection
from turnstate.providers._transport_settings import DrainLimits, PoolLimits


class TransportConnection:
    """The connection half of ``AiohttpTransport`` (see the module docstring)."""

    pool: PoolLimits
    drain: DrainLimits
    connect_timeout: float
    idle_timeout: float
    _timeouts: tuple[object, aiohttp.ClientTimeout]
    _drains: set[asyncio.Task[None]]

    async def _send(self, session: aiohttp.ClientSession, request: HttpRequest,
                    gate: PoolGate | None, origin: str) -> aiohttp.ClientResponse:
        """The response head, once the own session's ``gate`` gave ``origin`` a slot
        (given back here if no response comes). aiohttp copies the headers.

        Raises:
            _NoPooledConnection: no slot came free within ``PoolLimits.wait_seconds``.
        """
        data = request_data(request.body, self.idle_timeout, request.headers.get("content-type"))
        if gate is None:
            return await session.request(
                request.method, request.url, headers=request.headers, data=data,
                timeout=self._timeout(), allow_redirects=False)
        if not gate.take(origin) and not await gate.wait(origin, self.pool.wait_seconds):
            raise _NoPooledConnection
        try:
            return await session.request(
                request.method, request.url, headers=request.headers, data=data,
                timeout=self._timeout(), allow_redirects=False)
        except BaseException:
            gate.give_back(origin)
            raise

    def _timeout(self) -> aiohttp.ClientTimeout:
        """``sock_connect`` bounds establishing a new connection (what ``connect_timeout``
        means) and ``sock_read`` the wait for the head (``idle_timeout``; a 2xx body's
        reads are the ``ResponseStream``'s, an error body's aiohttp's). The wait for a
        pooled connection is the ``PoolGate``'s in the transport's own session; aiohttp's
        ``connect`` (the wait and the connection together) gets ``wait_seconds +
        connect_timeout``: a caller's session has no gate, and in the transport's own it
        is a backstop the gate makes unreachable (the connector has the gate's limits)."""
        key = (self.pool.wait_seconds, self.connect_timeout, self.idle_timeout)
        if self._timeouts[0] != key:  # built once per setting, not per request
            self._timeouts = (key, aiohttp.ClientTimeout(
                total=None, connect=self.pool.wait_seconds + self.connect_timeout,
                sock_connect=self.connect_timeout, sock_read=self.idle_timeout))
        return self._timeouts[1]

    async def _end(self, response: aiohttp.ClientResponse, complete: bool,
                   gate: PoolGate | None, origin: str) -> None:
        """Done with ``response``: a complete call's is settled (``_settle``); any other
        is released as ``async with response`` would (pooled only at the body's end,
        else its connection closed). Its pool slot is given back once aiohttp let go of
        the connection."""
        if complete:
            self._settle(response, gate, origin)
            return
        try:
            response.release()
            await response.wait_for_close()
        finally:
            if gate is not None:
                gate.give_back(origin)

    def _settle(self, response: aiohttp.ClientResponse, gate: PoolGate | None,
                origin: str) -> None:
        """A complete call's response: released now when its body's end is already in
        (aiohttp pooled the connection then), else drained by a tracked task."""
        if response.content.is_eof():
            response.release()
            if gate is not None:
                gate.give_back(origin)
            return
        task = asyncio.get_running_loop().create_task(_drain(response, self.drain))
        self._drains.add(task)
        task.add_done_callback(partial(_drained, self._drains, response, gate, origin))
