"""The SQLite store's hops to its worker thread under concurrency (issue 26).

Each test holds the worker with a gated hop (a ``threading.Event``), queues more hops
behind it, then lets the worker go: what runs where and in which order is decided by the
queue, not by timing. Statements are seen through the connection's trace callback.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.storage.support import start
from turnstate.core._errors import StorageError
from turnstate.storage import SqliteStore
from turnstate.storage._sqlite_conn import CHECKPOINT_EVERY

WAIT = 10  # seconds: only a bound on a broken test, never reached when it passes
SET_TIMEOUT = "PRAGMA busy_timeout ="


def traced(store: SqliteStore) -> list[str]:
    """Every statement the store's connection runs from now on, on either thread."""
    statements: list[str] = []
    store._conn.set_trace_callback(statements.append)
    return statements


def gated(store: SqliteStore, gate: threading.Event) -> asyncio.Future[Any]:
    """A hop that holds the worker until ``gate`` is set."""
    return asyncio.ensure_future(store._run(lambda conn: gate.wait(WAIT)))


async def queued(store: SqliteStore,
                 fn: Callable[[sqlite3.Connection], Any]) -> asyncio.Future[Any]:
    """A hop submitted to the worker (behind whatever is queued there) and not awaited."""
    hop = asyncio.ensure_future(store._run(fn))
    await asyncio.sleep(0)  # the task runs up to its await: the hop is on the queue
    return hop


def timeout_now(conn: sqlite3.Connection) -> int:
    (value,) = conn.execute("PRAGMA busy_timeout").fetchone()
    return int(value)


async def test_queued_hops_set_the_waiting_timeout_once_and_the_last_restores_zero(
        tmp_path: Path) -> None:
    """A run of queued hops waits with the configured busy timeout throughout, set by the
    first and put back to 0 by the last: two statements for the run, not two a hop."""
    async with SqliteStore.open(tmp_path / "x.db", busy_timeout_ms=1234) as store:
        statements = traced(store)
        gate = threading.Event()
        first = gated(store, gate)
        await asyncio.sleep(0)
        hops = [await queued(store, timeout_now) for _ in range(4)]
        gate.set()
        assert await first
        assert [await hop for hop in hops] == [1234] * 4
        assert timeout_now(store._conn) == 0  # inline, nothing in flight
        sets = [s for s in statements if s.startswith(SET_TIMEOUT)]
        assert sets == ["PRAGMA busy_timeout = 1234", "PRAGMA busy_timeout = 0"]


async def test_hops_finished_while_the_loop_is_busy_wake_it_once(tmp_path: Path) -> None:
    """Hops the worker finishes while the event loop's thread is busy are handed over in
    one wake-up (one ``call_soon_threadsafe``), and each caller gets its own outcome."""
    async with SqliteStore.open(tmp_path / "x.db") as store:
        loop = asyncio.get_running_loop()
        wakeups: list[object] = []
        threadsafe = loop.call_soon_threadsafe

        def counted(callback: Callable[..., object], *args: Any, **kwargs: Any) -> Any:
            if getattr(callback, "__self__", None) is store:
                wakeups.append(callback)
            return threadsafe(callback, *args, **kwargs)

        loop.call_soon_threadsafe = counted  # type: ignore[method-assign]
        try:
            gate, reached, release = threading.Event(), threading.Event(), threading.Event()
            first = gated(store, gate)
            await asyncio.sleep(0)
            hops = [await queued(store, lambda conn, n=n: n) for n in range(3)]
            last = await queued(store, lambda conn: (reached.set(), release.wait(WAIT))[1])
            gate.set()
            assert reached.wait(WAIT)  # the loop's thread is held here: four hops done
            assert len(wakeups) == 1
            release.set()
            assert await first and await last
            assert [await hop for hop in hops] == [0, 1, 2]
        finally:
            loop.call_soon_threadsafe = threadsafe  # type: ignore[method-assign]


async def test_queued_hops_run_in_order_and_report_to_their_own_callers(
        tmp_path: Path) -> None:
    """Behind a held worker: results and errors go to the hop that made them, a hop whose
    caller left before the worker reached it is skipped, and the count comes back to 0."""
    async with SqliteStore.open(tmp_path / "x.db") as store:
        ran: list[str] = []

        def step(name: str, fail: bool = False) -> Callable[[sqlite3.Connection], str]:
            def run(conn: sqlite3.Connection) -> str:
                ran.append(name)
                if fail:
                    conn.execute("SELECT * FROM no_such_table")
                return name
            return run

        gate = threading.Event()
        first = gated(store, gate)
        await asyncio.sleep(0)
        a = await queued(store, step("a"))
        b = await queued(store, step("b", fail=True))
        c = await queued(store, step("c"))
        d = await queued(store, step("d"))
        c.cancel()
        gate.set()
        assert await first
        assert await a == "a"
        with pytest.raises(StorageError, match="no_such_table"):
            await b
        with pytest.raises(asyncio.CancelledError):
            await c
        assert await d == "d"
        assert ran == ["a", "b", "d"]
        assert store._in_flight == 0
        assert timeout_now(store._conn) == 0


async def test_a_skipped_hop_last_in_the_queue_restores_the_zero_timeout(
        tmp_path: Path) -> None:
    """The last job out restores the zero timeout whatever it is: here a hop whose
    caller was cancelled before the worker reached it (it runs nothing else)."""
    async with SqliteStore.open(tmp_path / "x.db", busy_timeout_ms=1234) as store:
        restored = threading.Event()
        statements: list[str] = []

        def trace(statement: str) -> None:
            statements.append(statement)
            if statement == "PRAGMA busy_timeout = 0":
                restored.set()

        store._conn.set_trace_callback(trace)
        gate = threading.Event()
        first = gated(store, gate)
        await asyncio.sleep(0)
        read = await queued(store, timeout_now)
        skipped = await queued(store, timeout_now)
        skipped.cancel()
        gate.set()
        assert await first and await read == 1234
        assert await asyncio.to_thread(restored.wait, WAIT)
        assert statements[-1] == "PRAGMA busy_timeout = 0"
        assert timeout_now(store._conn) == 0  # the worker is past its last statement


async def test_a_checkpoint_queued_behind_hops_runs_with_the_zero_timeout(
        tmp_path: Path) -> None:
    """Hops followed on the queue by a background checkpoint leave it the waiting
    timeout; the checkpoint puts 0 back first, as it always ran (a WAL restart never
    waits for another process's lock), and the count and timeout end at 0."""
    path = tmp_path / "x.db"
    async with SqliteStore.open(path, busy_timeout_ms=5000) as store:
        await store.create_chat(owner="o", chat_id="c1")
        statements = traced(store)
        store._writes = CHECKPOINT_EVERY - 1
        other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        other.execute("BEGIN IMMEDIATE")  # the write cannot go inline: a hop that waits
        write = asyncio.ensure_future(store.begin_turn("c1", start("t1")))
        await asyncio.sleep(0)
        hold = threading.Event()
        held = await queued(store, lambda conn: (hold.wait(WAIT), timeout_now(conn))[1])
        await asyncio.to_thread(other.execute, "ROLLBACK")
        assert (await write).user_seq == 1  # the checkpoint is queued behind ``held``
        assert store._checkpointing
        hold.set()
        assert await held == 5000
        assert await store.fetch_raw("SELECT 1") == [(1,)]  # behind the checkpoint
        checkpoint = statements.index("PRAGMA wal_checkpoint(PASSIVE)")
        sets = [s for s in statements[:checkpoint] if s.startswith(SET_TIMEOUT)]
        assert sets == ["PRAGMA busy_timeout = 5000", "PRAGMA busy_timeout = 0"]
        assert store._in_flight == 0 and timeout_now(store._conn) == 0
        other.close()


def submissions(store: SqliteStore) -> list[object]:
    """Every job submitted to the store's worker from now on."""
    jobs: list[object] = []
    submit = store._worker.submit
    store._worker.submit = lambda job: (jobs.append(job), submit(job))[1]  # type: ignore[method-assign]
    return jobs


async def test_an_operation_arriving_during_a_hop_waits_for_it_then_runs_inline(
        tmp_path: Path) -> None:
    """Under load a hop in flight made every operation arriving meanwhile hop too, and
    the queue rarely drained (issue 26: 802 of 807 operations hopped at N = 100). Such
    an operation now waits for the worker to finish and runs inline: no hop of its own."""
    async with SqliteStore.open(tmp_path / "x.db") as store:
        await store.create_chat(owner="o", chat_id="c1")
        jobs = submissions(store)
        gate = threading.Event()
        first = gated(store, gate)
        await asyncio.sleep(0)
        write = asyncio.ensure_future(store.begin_turn("c1", start("t1")))
        read = asyncio.ensure_future(store.load_chat("c1"))
        await asyncio.sleep(0)
        assert not write.done() and not read.done()
        gate.set()
        assert await first
        assert (await write).user_seq == 1
        assert (await read).id == "c1"
        assert len(jobs) == 1  # the gated hop only


async def test_hops_arriving_behind_waiting_operations_cannot_overtake_them(
        tmp_path: Path) -> None:
    """A hop submitted while operations wait for the worker waits behind them, so a
    stream of hops (history loads) never keeps a write waiting."""
    async with SqliteStore.open(tmp_path / "x.db") as store:
        await store.create_chat(owner="o", chat_id="c1")
        statements = traced(store)
        jobs = submissions(store)
        gate = threading.Event()
        first = gated(store, gate)
        await asyncio.sleep(0)
        write = asyncio.ensure_future(store.begin_turn("c1", start("t1")))
        await asyncio.sleep(0)
        read = await queued(store, lambda conn: conn.execute("SELECT 42").fetchall())
        assert len(jobs) == 1  # the read waits too: not on the worker's queue
        gate.set()
        assert await first and (await write).user_seq == 1
        assert await read == [(42,)]
        # The begin is one statement on a chat the store created (``BEGIN_KNOWN``).
        began = next(index for index, sql in enumerate(statements)
                     if sql == "BEGIN IMMEDIATE" or sql.startswith("INSERT INTO temp.turn_"))
        assert began < statements.index("SELECT 42")


async def test_an_operation_waiting_for_the_worker_when_the_store_closes_is_refused(
        tmp_path: Path) -> None:
    """The close wakes the operations waiting for the worker; the close is in flight, so
    none of them runs inline on a connection being closed: each is refused."""
    gate = threading.Event()
    waiting: asyncio.Future[object] | None = None
    try:
        async with SqliteStore.open(tmp_path / "x.db") as store:
            await store.create_chat(owner="o", chat_id="c1")
            first = gated(store, gate)
            await asyncio.sleep(0)
            waiting = asyncio.ensure_future(store.begin_turn("c1", start("t1")))
            await asyncio.sleep(0)
            assert store._idle_waiters

            async def release_while_closing() -> None:
                await asyncio.sleep(0)  # the close is queued on the worker by now
                gate.set()

            releasing = asyncio.ensure_future(release_while_closing())
        await releasing
        assert await first
    finally:
        gate.set()
    assert waiting is not None
    with pytest.raises(StorageError):
        await waiting
