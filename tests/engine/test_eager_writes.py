"""A turn's begin and commit run eagerly (issue 26): on a store that completes them
without suspending (memory, SQLite's inline path) a cursor turn starts no task and
spends no loop iteration on them, and a commit that fails before suspending is still
settled as the commit's outcome (Python 3.12's eager tasks; on 3.11 ``_eager``'s own).
A write that suspends inside a timeout never cancels its caller (issues 25/26)."""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Generator, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from tests.engine.support import Env
from turnstate.core._errors import CommitConflict
from turnstate.engine._eager import eager_future


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


async def test_eager_future_is_done_unless_the_write_suspends() -> None:
    done = eager_future(_value())
    assert done.done() and await done == 7
    refused = eager_future(_refused())
    assert refused.done() and isinstance(refused.exception(), CommitConflict)
    pending: asyncio.Future[int] = eager_future(_suspending())
    assert asyncio.isfuture(pending) and not pending.done()
    assert await asyncio.shield(pending) == 8


async def _times_out_while_suspended(never: asyncio.Future[None]) -> None:
    async with asyncio.timeout(0):  # binds the current task, fires at the next iteration
        await never


async def test_a_write_timing_out_after_it_suspended_does_not_cancel_its_caller() -> None:
    """asyncpg's ``pool.acquire(timeout=...)`` enters a timeout before it waits for a
    connection: the timer must cancel the write's task, not the request handler that
    began the write (which aiohttp then answered by closing the connection)."""
    never: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    begun = eager_future(_times_out_while_suspended(never))
    assert not begun.done()
    with pytest.raises(TimeoutError):
        await asyncio.shield(begun)
    assert asyncio.current_task().cancelling() == 0  # type: ignore[union-attr]


_WRITE_VAR: contextvars.ContextVar[str] = contextvars.ContextVar("write", default="unset")


async def test_an_eager_write_runs_in_its_own_task_and_context_and_gives_the_caller_back() -> None:
    """The first step runs with the write's task current (what a timeout entered there
    binds), in a copy of the caller's context; the caller is the current task again
    as soon as it returns, and nothing the write set leaks into the caller's context."""
    caller = asyncio.current_task()
    seen: list[asyncio.Task[Any] | None] = []

    async def write() -> int:
        seen.append(asyncio.current_task())
        _WRITE_VAR.set("write")
        return 1

    done = eager_future(write())
    assert done.done() and done.result() == 1
    assert seen == [done] and done is not caller
    assert asyncio.current_task() is caller and _WRITE_VAR.get() == "unset"


async def test_a_suspended_eager_write_is_a_task_that_can_be_cancelled() -> None:
    never: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    async def waits() -> None:
        await never

    pending = eager_future(waits())
    assert not pending.done() and pending in asyncio.all_tasks()
    pending.cancel()
    with pytest.raises(asyncio.CancelledError):
        await pending
    assert never.cancelled() and asyncio.current_task().cancelling() == 0  # type: ignore[union-attr]


async def test_an_eager_write_costs_no_loop_iteration() -> None:
    """On every supported Python (3.11 included): a write that completes without
    suspending is done before the loop runs anything else."""
    ran: list[str] = []
    asyncio.get_running_loop().call_soon(ran.append, "loop")
    assert eager_future(_value()).done() and ran == []


async def test_an_eager_write_in_a_debug_loop_keeps_where_it_was_made() -> None:
    """The future's own ``__init__`` runs in debug mode only (it records the creation
    stack there); otherwise the task sets its loop and callbacks itself."""
    loop = asyncio.get_running_loop()

    async def write() -> int:
        return 1

    debug = loop.get_debug()
    try:
        loop.set_debug(True)
        made = eager_future(write())
        assert made.result() == 1 and made._source_traceback  # type: ignore[attr-defined]
        loop.set_debug(False)
        plain = eager_future(write())
        assert plain.result() == 1 and plain._source_traceback is None  # type: ignore[attr-defined]
        assert plain.get_loop() is loop
    finally:
        loop.set_debug(debug)
