"""A turn's begin and commit run eagerly (issue 26): on a store that completes them
without suspending (memory, SQLite's inline path) a cursor turn starts no task, and a
commit that fails before suspending is still settled as the commit's outcome (Python
3.12's eager tasks; 3.11 starts the task). A write that suspends inside a timeout never
cancels its caller (issues 25/26)."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Generator, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from tests.engine.support import Env
from turnstate.core._errors import CommitConflict
from turnstate.engine._eager import eager_future, eagerly

EAGER_TASKS = pytest.mark.skipif(sys.version_info < (3, 12),
                                 reason="eager tasks came with Python 3.12")


@contextmanager
def tasks_started() -> Iterator[list[str]]:
    """The names of the coroutines the running loop makes tasks of, while inside."""
    loop = asyncio.get_running_loop()
    names: list[str] = []
    previous = loop.get_task_factory()

    def factory(loop: asyncio.AbstractEventLoop, coro: Any, **kwargs: Any) -> asyncio.Task[Any]:
        names.append(getattr(coro, "__qualname__", type(coro).__name__))
        return asyncio.Task(coro, loop=loop, **kwargs)

    loop.set_task_factory(factory)
    try:
        yield names
    finally:
        loop.set_task_factory(previous)


@EAGER_TASKS
async def test_a_cursor_turn_starts_no_task(env: Env) -> None:
    await env.turn("first")
    with tasks_started() as names:
        outcome = await env.turn("second")
    assert outcome.final.strategy == "cursor" and outcome.committed
    assert names == []


async def _refused() -> None:
    raise CommitConflict("c1", 1, 2)


async def _value() -> int:
    return 7


class _Suspends:
    """An awaitable that suspends once, then returns its value."""

    def __await__(self) -> Generator[None, None, int]:
        yield None
        return 8


async def _suspending() -> int:
    return await _Suspends()


@EAGER_TASKS
async def test_eager_future_is_done_unless_the_write_suspends() -> None:
    done = eager_future(_value())
    assert done.done() and await done == 7
    refused = eager_future(_refused())
    assert refused.done() and isinstance(refused.exception(), CommitConflict)
    pending: asyncio.Future[int] = eager_future(_suspending())
    assert isinstance(pending, asyncio.Task) and not pending.done()
    assert await asyncio.shield(pending) == 8


async def _times_out_while_suspended(never: asyncio.Future[None]) -> None:
    async with asyncio.timeout(0):  # binds the current task, fires at the next iteration
        await never


async def test_a_write_timing_out_after_it_suspended_does_not_cancel_its_caller() -> None:
    """asyncpg's ``pool.acquire(timeout=...)`` enters a timeout before it waits for a
    connection: the timer must cancel the write's task, not the request handler that
    began the write (which aiohttp then answered by closing the connection)."""
    never: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    begun = eagerly(_times_out_while_suspended(never))
    assert isinstance(begun, asyncio.Task)
    with pytest.raises(TimeoutError):
        await asyncio.shield(begun)
    assert asyncio.current_task().cancelling() == 0  # type: ignore[union-attr]
