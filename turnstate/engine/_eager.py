"""Running a coroutine eagerly: up to its first suspension now, in a task of its own.

``TurnLife`` begins and commits a turn this way: a store whose ``begin_turn`` completes
without suspending (``MemoryStore``, ``SqliteStore``'s inline path) costs no loop
iteration; one that suspends is finished by the same task, which the caller can shield.

The first step runs in the task that finishes the coroutine, never in the caller's:
code that binds the current task before it suspends (``asyncio.timeout``, asyncpg's
``pool.acquire(timeout=...)``) would otherwise cancel the caller when its timer fires,
while the task finishing the write waited on (issue 25/26: a PostgreSQL pool that stayed
busy for its acquire timeout cancelled HTTP handlers, and clients saw "Server
disconnected"). Python 3.12's eager tasks give that (``eager_start=True``). Python 3.11
has no eager start, so ``_EagerTask`` does what 3.12's does: it becomes the current task
for its first step, run at once, and is a task like any other if that step suspends. A
task started and awaited the ordinary way cost two loop iterations per write there (a
memory or SQLite cursor turn paid about 36 us for its begin and commit, issue 26).
"""

from __future__ import annotations

import asyncio
import contextvars
import sys
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def eager_future(coro: Coroutine[Any, Any, T]) -> asyncio.Future[T]:
    """A task running ``coro``, whose first step has already run in it: done (with its
    result or its exception) when ``coro`` completed without suspending. For a write that
    must run to its end even if its caller is cancelled: the caller awaits it through
    ``shield``."""
    return _start(coro, asyncio.get_running_loop())


if sys.version_info >= (3, 12):  # pragma: no cover - CI runs 3.11

    def _start(coro: Coroutine[Any, Any, T], loop: asyncio.AbstractEventLoop) -> asyncio.Future[T]:
        return asyncio.Task(coro, loop=loop, eager_start=True)  # type: ignore[call-arg]

else:
    from asyncio import futures, tasks

    class _EagerTask(tasks._PyTask):  # type: ignore[name-defined,misc]
        """Python 3.11's pure-Python ``Task`` started as 3.12's ``eager_start`` starts
        one: the first step now, with this task as the current one (the caller's task
        set aside meanwhile), in the task's own copy of the context. Registered among
        the loop's tasks only if that step suspends; its later steps are the ordinary
        ``Task``'s, woken by what it awaits."""

        def __init__(self, coro: Coroutine[Any, Any, Any],
                     loop: asyncio.AbstractEventLoop) -> None:
            # ``Task.__init__`` without its ``call_soon`` of the first step; the
            # future's own ``__init__`` only in debug mode (else it sets these two).
            if loop.get_debug():
                futures._PyFuture.__init__(self, loop=loop)  # type: ignore[attr-defined]
            else:
                self._loop = loop
                self._callbacks: list[Any] = []
            self._name = f"Task-{tasks._task_name_counter()}"  # type: ignore[attr-defined]
            self._num_cancels_requested = 0
            self._must_cancel = False
            self._fut_waiter = None
            self._coro = coro
            self._context = contextvars.copy_context()
            # ``asyncio.current_task(loop)``, which is Python on 3.11, as a dict lookup.
            caller = tasks._current_tasks.get(loop)  # type: ignore[attr-defined]
            if caller is not None:
                tasks._leave_task(loop, caller)
            try:
                self._context.run(self._Task__step)
            finally:
                if caller is not None:
                    tasks._enter_task(loop, caller)
            if not self.done():
                tasks._register_task(self)

    def _start(coro: Coroutine[Any, Any, T], loop: asyncio.AbstractEventLoop) -> asyncio.Future[T]:
        return _EagerTask(coro, loop)
