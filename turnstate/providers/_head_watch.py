"""The deadline of every attempt's wait for its response head, under one loop timer.

aiohttp's ``sock_read`` (the idle timeout) bounds each wait for a byte of the head; a
server that drips header lines a little faster than that, forever, is bounded by
nothing else. Each attempt's head must come before its deadline (``max_stream_seconds``
after its request was sent). A timer per request (``asyncio.timeout_at``) cost every
call one (issue 26: no timer per request), so ``HeadWatch`` keeps the waiting attempts
in a queue, first in first out: their deadlines are their starts plus the same
``seconds``, so they come due in that order, and one timer is armed for the earliest
still waiting. An attempt whose head came is emptied (``done``) and dropped from the
queue's front as soon as it reaches it. When the timer finds an attempt past its
deadline still waiting, it cancels that attempt's task; the transport takes such a
cancellation back (``Task.uncancel``) and raises ``StreamLimitExceeded`` instead.
"""

from __future__ import annotations

import asyncio
from collections import deque

EARLY = 0.001
"""A timer may fire this early (seconds) and still count as due."""


class HeadWait:
    """One attempt waiting for its head: its task (None once ``done``), its deadline,
    and whether the watch cancelled it (``expired``)."""

    __slots__ = ("due", "expired", "task")

    def __init__(self, task: asyncio.Task[object] | None, due: float) -> None:
        self.task, self.due, self.expired = task, due, False

    def done(self) -> None:
        """The head came, or the wait ended otherwise: nothing to watch any more."""
        self.task = None


class HeadWatch:
    """The waits for a head of one event loop, ``seconds`` each, under one timer."""

    __slots__ = ("loop", "seconds", "timer", "waiting")

    def __init__(self, loop: asyncio.AbstractEventLoop, seconds: float) -> None:
        self.loop, self.seconds = loop, seconds
        self.timer: asyncio.TimerHandle | None = None
        self.waiting: deque[HeadWait] = deque()

    def start(self, due: float) -> HeadWait:
        """Watch the current task's wait for a head until ``due`` (loop time)."""
        waiting = self.waiting
        while waiting and waiting[0].task is None:  # heads come mostly in order
            waiting.popleft()
        wait = HeadWait(asyncio.current_task(), due)
        waiting.append(wait)
        if self.timer is None:
            self.timer = self.loop.call_at(waiting[0].due, self._fire)
        return wait

    def _fire(self) -> None:
        self.timer = None
        now = self.loop.time()
        waiting = self.waiting
        while waiting:
            wait = waiting[0]
            task = wait.task
            if task is not None and wait.due - now >= EARLY:
                self.timer = self.loop.call_at(wait.due, self._fire)
                return
            waiting.popleft()
            if task is not None:  # past its deadline, still waiting for its head
                wait.expired = True
                wait.task = None
                task.cancel()
