"""A turn's life holds at every point it can be cut, on every store (lifecycle5).

The sweep runs the turn of ``cancel_points`` (cursor, replay and local tool-loop paths,
each with a tool call) and cuts it at its k-th suspension, its k-th event, its k-th loop
step (a detached turn stopped, its engine closed) or its k-th store call (a fault before
or after the write), for every k until the turn runs to its end; after each cut the
rig's invariants are checked and a new turn on the chat must begin at once and commit.
No task outlives a cut, and the loop reports no error (a task never retrieved, a
coroutine never awaited).
"""

from __future__ import annotations

import asyncio
import gc
import warnings
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from tests import pg_support
from tests.engine.cancel_points import (
    PATHS,
    FaultyStore,
    Rig,
    cut_aclose,
    cut_detached,
    cut_task,
    rig,
)
from tests.engine.support import collecting_only_newer_objects
from turnstate.core._events import TurnEvent
from turnstate.storage import MemoryStore, PostgresStore, SqliteStore, Store
from turnstate.storage._fence_signal import NOTIFY
from turnstate.storage._postgres_connect import CONNECT
from turnstate.storage._postgres_log import LISTEN_OPEN

MAX_K = 400  # far past any turn's length here: a sweep that reaches it never ended

# Every cut on every path on the memory store and on SQLite's worker path (where every
# write suspends); SQLite's inline path and PostgreSQL on a few paths each: the whole
# file stays near 10 s for CI.
FULL = [(kind, path) for kind in ("memory", "sqlite-worker") for path in PATHS]
TASK = [*FULL, *((kind, path) for kind in ("sqlite-file", "postgres") for path in PATHS)]
SOME = [*FULL, ("sqlite-file", "cursor"), ("postgres", "cursor"), ("postgres", "local")]
FEW = [*FULL, ("postgres", "cursor")]


@pytest.fixture
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    if request.param == "memory":
        yield MemoryStore()
    elif request.param.startswith("sqlite"):  # the worker: every write suspends
        async with SqliteStore.open(tmp_path / "chats.db",
                                    inline_writes=request.param == "sqlite-file") as sqlite:
            yield sqlite
    else:
        request.getfixturevalue("pg_schema")
        async with PostgresStore.open(pg_support.DSN, schema=pg_support.SCHEMA,
                                      pool_max=4) as postgres:
            yield postgres


class _Loop:
    """What the loop reported (its exception handler) while a sweep ran."""

    def __init__(self) -> None:
        self.reports: list[dict[str, Any]] = []
        loop = asyncio.get_running_loop()
        self._before = loop.get_exception_handler()
        loop.set_exception_handler(lambda _, context: self.reports.append(context))

    def restore(self) -> None:
        asyncio.get_running_loop().set_exception_handler(self._before)


# the engine's and the store's, not a turn's
_SERVICE = frozenset({"turn stop poller", "turn log writer", "sqlite turn-log watch",
                      LISTEN_OPEN, "postgres relisten"})
# a store's background writes a cut leaves to finish (a connect never cut half-way, a
# reclaim's notification): they end on their own, as a cancelled heartbeat does
_FINISHING = frozenset({CONNECT, NOTIFY})
# asyncpg's own: a query cut mid-flight is cancelled by a CancelRequest sent from a task
# of its own (``Connection._cancel``); an expired pool connection closed in one
_ASYNCPG_FINISHING = frozenset({"Connection._cancel", "Connection.close"})


def _finishing(task: asyncio.Task[Any]) -> bool:
    """A task the cut started that ends on its own (waited for, bounded)."""
    coro = task.get_coro()
    return (task.cancelling() > 0 or task.get_name() in _FINISHING
            or getattr(coro, "__qualname__", "") in _ASYNCPG_FINISHING)


def _left(before: set[asyncio.Task[Any]]) -> set[asyncio.Task[Any]]:
    return asyncio.all_tasks() - before - {asyncio.current_task()}  # type: ignore[operator]


async def _ending(tasks: set[asyncio.Task[Any]]) -> None:
    """Let the tasks the turn cancelled as it ended finish (a heartbeat stopped with its
    renewal in flight ends within a step or two, or at the store's own cancel): they are
    not left running, where a task nobody cancelled is."""
    cancelling = [t for t in tasks if _finishing(t)]
    if cancelling:
        await asyncio.wait(cancelling, timeout=5.0)


async def sweep(made: Rig, cut: Callable[[Rig, int], Awaitable[bool]]) -> list[str]:
    """Cut the rig's turn at k = 1, 2, ... until it runs to its end; the endings seen."""
    loop = _Loop()
    endings: list[str] = []
    before = asyncio.all_tasks()
    try:
        # The collector walks only what the sweep made (its turns, their coroutines and
        # tasks): the heap a long run built before it is frozen out of its reach.
        with warnings.catch_warnings(record=True) as caught, collecting_only_newer_objects():
            warnings.simplefilter("always")
            for k in range(1, MAX_K):
                await made.note_state()
                ended = await cut(made, k)
                endings.append(str(await made.check(made.turn_id)))
                await made.next_turn_completes()
                left = {t for t in _left(before) if t.get_name() not in _SERVICE}
                await _ending(left)
                left = {t for t in left if not t.done()}
                assert not left, f"k={k}: tasks left after the cut: {left}"
                if ended:
                    break
            else:
                pytest.fail(f"the turn never ran to its end in {MAX_K} cuts")
            await made.engine.aclose()  # its log writer and stop poller end with it
            left = {t for t in _left(before) if t.get_name() != "sqlite turn-log watch"}
            assert not left, left
            gc.collect()
        problems = [str(w.message) for w in caught
                    if "never awaited" in str(w.message) or "destroyed" in str(w.message)]
        assert not problems, problems
        assert not loop.reports, loop.reports
    finally:
        loop.restore()
    assert endings[-1] == "completed", endings
    return endings


@pytest.mark.parametrize(("store", "path"), TASK, indirect=["store"])
async def test_the_consumer_task_cancelled_at_every_suspension(store: Store, path: str) -> None:
    made = await rig(store, path)
    endings = await sweep(made, lambda r, k: cut_task(r, r.the_turn(), k))
    assert "aborted cancelled" in endings


@pytest.mark.parametrize(("store", "path"), FEW, indirect=["store"])
async def test_the_consumer_task_cancelled_twice(store: Store, path: str) -> None:
    """A second cancel one suspension after the first (the ending itself cut)."""
    made = await rig(store, path)
    endings = await sweep(made, lambda r, k: cut_task(r, r.the_turn(), k, again=1))
    assert "aborted cancelled" in endings


@pytest.mark.parametrize(("store", "path"), SOME, indirect=["store"])
async def test_the_events_closed_at_every_event(store: Store, path: str) -> None:
    made = await rig(store, path)
    endings = await sweep(made, lambda r, k: cut_aclose(r, r.the_turn(), k))
    assert "aborted cancelled" in endings


@pytest.mark.parametrize("how", ["stop", "close"])
@pytest.mark.parametrize(("store", "path"), FEW, indirect=["store"])
async def test_a_detached_turn_stopped_or_closed_at_every_step(
        store: Store, path: str, how: str) -> None:
    made = await rig(store, path)
    endings = await sweep(made, lambda r, k: cut_detached(r, r.the_turn(), k, how))
    assert any(e.startswith("aborted") for e in endings), endings


async def _faulted(made: Rig, k: int, *, after: bool, bug: bool = False) -> bool:
    faulty = FaultyStore(made.store, k, after=after, bug=bug)
    engine = made.engine
    engine.store = faulty  # type: ignore[assignment]
    faulty.armed = True
    try:
        events: list[TurnEvent] = []
        try:
            async for event in engine.run_turn(made.chat_id, made.the_turn()):
                events.append(event)
        except Exception as exc:
            assert type(exc).__name__ in ("StorageUnavailable", "RuntimeError"), exc
        return faulty.calls < k
    finally:
        faulty.armed = False
        engine.store = made.store


@pytest.mark.parametrize("after", [False, True], ids=["lost", "landed"])
@pytest.mark.parametrize(("store", "path"), SOME, indirect=["store"])
async def test_a_store_call_failing_at_every_call(store: Store, path: str, after: bool) -> None:
    made = await rig(store, path)
    await sweep(made, lambda r, k: _faulted(r, k, after=after))


@pytest.mark.parametrize(("store", "path"), FEW, indirect=["store"])
async def test_a_store_call_raising_a_bug_at_every_call(store: Store, path: str) -> None:
    made = await rig(store, path)
    await sweep(made, lambda r, k: _faulted(r, k, after=False, bug=True))


@pytest.mark.parametrize("cut", ["twice", "stop"])
@pytest.mark.parametrize(("store", "path"), [("memory", "cursor"), ("sqlite-worker", "local")],
                         indirect=["store"])
async def test_cuts_while_the_heartbeat_beats(store: Store, path: str, cut: str) -> None:
    """Renewals every 2 ms (each bounded by that interval, retried) race every cut; a
    heartbeat stopped with its renewal in flight ends within a step (``_ending``)."""
    made = await rig(store, path, lease_seconds=1.0, heartbeat_seconds=0.002)
    if cut == "twice":
        await sweep(made, lambda r, k: cut_task(r, r.the_turn(), k, again=1))
    else:
        await sweep(made, lambda r, k: cut_detached(r, r.the_turn(), k, "stop"))
