"""Running a coroutine eagerly: up to its first suspension now, as a task only after.

``TurnLife`` begins and commits a turn this way: a store whose ``begin_turn`` completes without
suspending (``MemoryStore``, ``SqliteStore``'s inline path) costs no task and no loop
iteration; one that suspends is finished by a task the caller can shield. (Python 3.12's
eager task factory does this for every task; the project supports 3.11.)
"""

from __future__ import annotations

import asyncio
import types
from collections.abc import Coroutine, Generator
from typing import Any, TypeVar

T = TypeVar("T")


def eagerly(coro: Coroutine[Any, Any, T]) -> T | asyncio.Task[T]:
    """``coro``'s result if it completes without suspending, else a task finishing it."""
    try:
        pending = coro.send(None)
    except StopIteration as done:
        result: T = done.value
        return result
    return asyncio.ensure_future(_resumed(coro, pending))


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


@types.coroutine
def _resumed(coro: Coroutine[Any, Any, T], pending: Any) -> Generator[Any, Any, T]:
    """The rest of ``coro``, which already ran to its first suspension (``pending``, what
    it yielded then): a coroutine a task can run, forwarding sends and throws."""
    try:
        sent = yield pending
    except BaseException as exc:
        thrown: BaseException | None = exc
    else:
        thrown = None
    while True:
        try:
            pending = coro.throw(thrown) if thrown is not None else coro.send(sent)
        except StopIteration as done:
            result: T = done.value
            return result
        try:
            sent, thrown = (yield pending), None
        except BaseException as exc:
            thrown = exc
