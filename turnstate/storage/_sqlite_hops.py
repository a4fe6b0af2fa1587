"""The worker-thread half of ``SqliteConnection`` (``_sqlite_conn``): one hop's function
run on the store's worker thread (``Worker``), its outcome reported back to the loop in
batches, and the busy timeout the worker waits with.

``WorkerHops`` is a mixin: the connection's fields are its state. Kept apart so the
inline-or-one-hop rule of ``_sqlite_conn`` reads on its own.
"""

from __future__ import annotations

import asyncio
import collections
import functools
import sqlite3
from collections.abc import Callable
from typing import Any, TypeVar

from turnstate.storage._sqlite_quota import sqlite_error
from turnstate.storage._sqlite_worker import Worker, settle

T = TypeVar("T")
Conn = sqlite3.Connection
Report = tuple[asyncio.Future[Any], object, BaseException | None]


class WorkerHops:
    """Hops to the worker thread and their reports (see the module docstring)."""

    _conn: Conn
    _worker: Worker
    _loop: asyncio.AbstractEventLoop
    _inline_writes: bool
    _in_flight: int
    _waiting_pragma: str
    _timeout_set: bool
    _reports: collections.deque[Report]
    _wake_pending: bool
    _idle_waiters: list[asyncio.Future[None]]

    async def _submitted(self, fn: Callable[[Conn], T]) -> T:
        """One hop now: ``fn`` on the worker thread (``_hop``), reported back through
        ``_report``, which also lowers the count. A caller cancelled before the worker
        starts the hop skips it; once started, it runs to its end (and is counted until
        then)."""
        done: asyncio.Future[T] = self._loop.create_future()
        self._worker.submit(functools.partial(self._hop, done, fn))
        self._in_flight += 1
        try:
            return await done
        except (sqlite3.Error, UnicodeEncodeError) as exc:
            raise sqlite_error(exc) from exc

    def _hop(self, done: asyncio.Future[T], fn: Callable[[Conn], T]) -> None:
        """On the worker thread: one hop's work and its report."""
        result: T | None = None
        try:
            if done.cancelled():  # the caller left before the worker got here
                self._unwait_if_last()
            else:
                result = self._waiting(fn)
        except BaseException as exc:  # reported to the caller, on its loop
            self._report(done, None, exc)
            return
        self._report(done, result, None)

    def _report(self, done: asyncio.Future[Any], result: object,
                error: BaseException | None) -> None:
        """On the worker thread: queue a finished hop's outcome for the loop, waking the
        loop only when no wake-up is pending (one ``call_soon_threadsafe``, a write to
        the loop's self-pipe, for every hop that finishes before the loop drains).

        The flag is cleared by ``_drain`` before it pops anything, so a report appended
        while the flag still reads set is always popped by the drain that is due."""
        self._reports.append((done, result, error))
        if not self._wake_pending:
            self._wake_pending = True
            self._loop.call_soon_threadsafe(self._drain)

    def _drain(self) -> None:
        """On the loop: the worker finished these hops (the count drops for each) and
        their callers, if still waiting, get the outcomes."""
        self._wake_pending = False
        reports = self._reports
        while reports:
            done, result, error = reports.popleft()
            self._in_flight -= 1
            settle(done, result, error)
        if self._in_flight == 0 and self._idle_waiters:
            self._wake_idle_waiters()

    def _waiting(self, fn: Callable[[Conn], T]) -> T:
        """``fn(conn)`` with the configured busy timeout (on the worker thread).

        With inline operations on, the connection's busy timeout is 0 whenever nothing
        is in flight (an inline operation must never wait on the event loop's thread);
        only what runs on the worker waits for another process's lock. The first hop
        of a run of queued ones sets the timeout and the last one out (any job that
        finds the worker's queue empty: ``_unwait_if_last``) restores 0 before its
        report can let the count reach 0: two statements per run of hops, not per hop.
        """
        if not self._inline_writes:
            return fn(self._conn)
        try:
            if not self._timeout_set:
                self._conn.execute(self._waiting_pragma)
                self._timeout_set = True
            return fn(self._conn)
        finally:
            self._unwait_if_last()

    def _unwait_if_last(self) -> None:
        """On the worker thread: back to the zero busy timeout when nothing is queued."""
        if self._timeout_set and self._worker.idle():
            self._unwait()

    def _unwait(self) -> None:
        if self._timeout_set:
            self._conn.execute("PRAGMA busy_timeout = 0")
            self._timeout_set = False

    def _wake_idle_waiters(self) -> None:
        """On the loop: the worker is idle (or the store closes): wake every waiter."""
        waiters, self._idle_waiters = self._idle_waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)
