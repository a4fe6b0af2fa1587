"""The bounded wait for a pooled connection of the transport's own session (``PoolLimits``).

``PoolGate`` counts the connections the transport holds (a request taken in and its
response not yet released or closed), per origin and in all, against ``PoolLimits``.
A request within the limits takes its slot at once, with no await and no timer; one
beyond them queues, first come first served, for at most ``wait_seconds``, and a slot
given back goes straight to the first waiter it fits. The session's connector has the
same limits, so aiohttp never queues a request the gate let in: the gate gives a slot
back only after aiohttp has released the connection.

This replaced aiohttp's trace signals (``on_connection_queued_start``/``_end``), which
bounded the wait before: with a ``TraceConfig`` on the session, every request ran about
ten signal coroutines, queued or not (issue 26).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque

from yarl import URL

from turnstate.providers._transport_settings import PoolLimits


def origin_of(url: str) -> str:
    """The pool key of ``url``: its origin as aiohttp's connector keys its pool, scheme
    and host in lower case, a default port dropped and user info left out
    (``https://H:443`` and ``https://h`` are one origin). Normalised once per
    authority (a transport talks to a handful), then read from a small memo."""
    scheme, _, rest = url.partition("://")
    key = f"{scheme}://{rest.split('/', 1)[0].split('?', 1)[0].split('#', 1)[0]}"
    origin = _ORIGINS.get(key)
    if origin is None:
        origin = _normalised(key)
        if len(_ORIGINS) < _ORIGINS_KEPT:
            _ORIGINS[key] = origin
    return origin


_ORIGINS: dict[str, str] = {}
_ORIGINS_KEPT = 256


def _normalised(key: str) -> str:
    try:
        return str(URL(key).origin())
    except ValueError:  # not an absolute URL: aiohttp refuses it when sent; key as is
        return key


class PoolGate:
    """The connections in use, per origin and in all, against ``limits`` (0: no limit)."""

    __slots__ = ("_held", "_in_use", "_per_host", "_total", "_waiters")

    def __init__(self, limits: PoolLimits) -> None:
        self._per_host = limits.per_host
        self._total = limits.total
        self._held: dict[str, int] = {}
        self._in_use = 0
        self._waiters: deque[tuple[str, asyncio.Future[None]]] = deque()

    @property
    def in_use(self) -> int:
        """Slots taken and not yet given back."""
        return self._in_use

    def take(self, origin: str) -> bool:
        """Take a slot for ``origin`` if one is free now (no await)."""
        if not self._fits(origin):
            return False
        self._hold(origin)
        return True

    async def wait(self, origin: str, seconds: float) -> bool:
        """Queue for a slot for ``origin`` at most ``seconds``; whether one came."""
        waiter = asyncio.get_running_loop().create_future()
        entry = (origin, waiter)
        self._waiters.append(entry)
        got = False
        try:
            async with asyncio.timeout(seconds):
                await waiter
            got = True
        except TimeoutError:
            pass
        finally:
            if got:
                pass
            elif waiter.done() and not waiter.cancelled():  # handed a slot, then stopped
                self.give_back(origin)
            else:  # still queued when the time ran out or the task was cancelled
                waiter.cancel()
                with contextlib.suppress(ValueError):
                    self._waiters.remove(entry)
        return got

    def give_back(self, origin: str) -> None:
        """Return ``origin``'s slot: the first waiters it (and others freed) fit get one."""
        held = self._held[origin] - 1
        if held:
            self._held[origin] = held
        else:
            del self._held[origin]
        self._in_use -= 1
        if self._waiters:
            self._hand_over()

    def _fits(self, origin: str) -> bool:
        return ((not self._total or self._in_use < self._total)
                and (not self._per_host or self._held.get(origin, 0) < self._per_host))

    def _hold(self, origin: str) -> None:
        self._held[origin] = self._held.get(origin, 0) + 1
        self._in_use += 1

    def _hand_over(self) -> None:
        for entry in list(self._waiters):
            origin, waiter = entry
            if waiter.done():  # cancelled: its wait leaves the queue at its next step
                self._waiters.remove(entry)
            elif self._fits(origin):
                self._waiters.remove(entry)
                self._hold(origin)
                waiter.set_result(None)
            elif self._total and self._in_use >= self._total:
                return
