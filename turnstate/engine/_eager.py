"""Running a coroutine eagerly: up to its first suspension now, as a task only after.

``TurnLife`` begins and commits a turn this way: a store whose ``begin_turn`` completes
without suspending (``MemoryStore``, ``SqliteStore``'s inline path) costs no loop
iteration; one that suspends is finished by a task the caller can shield.

The first step runs in the task that finishes the coroutine, never in the caller's:
code that binds the current task before it suspends (``asyncio.timeout``, asyncpg's
``pool.acquire(timeout=...)``) would otherwise cancel the caller when its timer fires,
while the task finishing the write waited on (issue 25/26: a PostgreSQL pool that stayed
busy for its acquire timeout cancelled HTTP handlers, and clients saw "Server
disconnected"). Python 3.12's eager tasks give that; on 3.11 the coroutine starts as an
ordinary task, one loop iteration later.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def eagerly(coro: Coroutine[Any, Any, T]) -> T | asyncio.Task[T]:
    """``coro``'s result if it completes without suspending, else a task finishing it
    (on Python 3.11 always the task: see the module's docstring)."""
    if sys.version_info >= (3, 12):
        task = asyncio.Task(coro, loop=asyncio.get_running_loop(), eager_start=True)
        return task.result() if task.done() else task
    return asyncio.ensure_future(coro)


def eager_future(coro: Coroutine[Any, Any, T]) -> asyncio.Future[T]:
    """``eagerly`` as a future: already done (its result or its exception) when ``coro``
    completed without suspending, else the task finishing it. For a write that must run
    to its end even if its caller is cancelled: the caller awaits it through ``shield``."""
    future: asyncio.Future[T]
    try:
        begun = eagerly(coro)
    except Exception as exc:  # raised before any suspension: the future carries it
        future = asyncio.get_running_loop().create_future()
        future.set_exception(exc)
        return future
    if isinstance(begun, asyncio.Task):
        return begun
    future = asyncio.get_running_loop().create_future()
    future.set_result(begun)
    return future
