"""An event loop whose clock moves only while the loop would wait (ops10).

The lease tests are about durations: a lease that runs out, renewals retried within
it, a turn outliving several leases. On the real clock a busy machine stretches every
step between two timers (a loop stalled 0.2 s past a 0.4 s lease's beat loses it), so
such a test failed now and then under load. ``run_virtual`` runs a coroutine on a loop
whose ``time()`` is virtual: it stands still while callbacks run, however long they
take, and when nothing is ready it jumps straight to the next timer. Every timer, sleep,
``asyncio.timeout`` and the engine's lease deadline read ``loop.time()``, and a
``MemoryStore`` given ``monotonic=loop.time`` (``virtual_store``) counts its lease
expiry on the same clock, so the durations a test checks are exact and the machine's
load cannot move them. A test's checks still run the real code paths: only the clock is
the loop's.

For coroutines whose every wait is on the loop itself (no threads, no sockets to other
processes): a loop with no ready callback and a timer pending would skip past a thread's
or a socket's answer. Such waits are still served (the selector is polled first, and
waited on for real when no timer is pending), but their durations are not virtual.
"""

from __future__ import annotations

import asyncio
import selectors
from collections.abc import Coroutine
from typing import Any, TypeVar

from turnstate.storage import MemoryStore

T = TypeVar("T")

START = 1000.0
"""The virtual clock's reading when a loop starts (any positive number)."""


class _Skipping(selectors.DefaultSelector):
    """The loop's selector: polled, never slept on while a timer is pending."""

    def __init__(self) -> None:
        super().__init__()
        self.now = START

    def select(self, timeout: float | None = None) -> list[tuple[Any, int]]:
        ready = super().select(0)
        if ready or timeout == 0:
            return ready
        if timeout is None:  # no timer: only a socket or a thread can wake the loop
            return super().select(None)
        self.now += timeout  # the loop asked to sleep until its next timer: it is now
        return []


class VirtualClockLoop(asyncio.SelectorEventLoop):
    """A selector loop on a virtual clock (see the module)."""

    def __init__(self) -> None:
        self._skipping = _Skipping()
        super().__init__(self._skipping)

    def time(self) -> float:
        return self._skipping.now


def run_virtual(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to completion on a fresh ``VirtualClockLoop``."""
    loop = VirtualClockLoop()
    try:
        return loop.run_until_complete(coro)
    finally:
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()


def virtual_store() -> MemoryStore:
    """A ``MemoryStore`` whose leases run on the running loop's (virtual) clock."""
    return MemoryStore(monotonic=asyncio.get_running_loop().time)
