"""The connection under ``SqliteStore``: opening, migrating, and running transactions.

One ``sqlite3`` connection does all the work (SQLite allows one writer at a time; WAL
lets readers in other processes carry on), with one worker thread of its own
(``Worker``, ``_sqlite_worker``): every operation is one plain function run there as one
hop, or inline on the event loop's thread when the worker has nothing (see ``_write``
and ``_read``; one arriving while the worker has something waits for it to finish, then
runs inline). What the worker has is counted from submission until the worker has
finished the function (its report, handed to the loop with any others finished
meanwhile in one thread-safe call, lowers the count), never by the awaiting task: a task
cancelled while its operation runs does not stop the worker, so the count, and with it
the inline path, waits for the worker to be idle. One transaction per connection holds
under any cancellation. No private attribute of any library is used (aiosqlite, used
before, has no public "run this on your thread" call).

The worker-thread half (a hop and its report) is ``_sqlite_hops``; the background WAL
checkpoints are ``_sqlite_checkpoints``: mixins of ``SqliteConnection``.
"""
from __future__ import annotations

import asyncio
import collections
import functools
import os
import sqlite3
import urllib.parse
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any, Self, TypeVar

from turnstate.core._errors import ConfigurationError, StorageError
from turnstate.storage import _sqlite_sql as q
from turnstate.storage._lease_clock import Seconds, release_locks, sqlite_lease_clock
from turnstate.storage._migrations import foreign_tables_refused, migrate, require_current
from turnstate.storage._records import Clock, format_ts, utc_now
from turnstate.storage._sqlite_checkpoints import (
    CHECKPOINT_BACKSTOP,
    CHECKPOINT_EVERY,
    WalCheckpoints,
    checkpoints_in_background,
)
from turnstate.storage._sqlite_hops import Conn
from turnstate.storage._sqlite_quota import sqlite_error
from turnstate.storage._sqlite_worker import Worker, store_closed

__all__ = ["CHECKPOINT_BACKSTOP", "CHECKPOINT_EVERY", "Conn", "SqliteConnection"]

T = TypeVar("T")


def _location(path: str | os.PathLike[str], busy_timeout_ms: int) -> str:
    """``SqliteStore.open``'s path as ``sqlite3`` takes it, its options checked (None
    for the path raised ``os.fspath``'s bare ``TypeError``).

    Raises:
        ConfigurationError: not a path, or a busy timeout that is not a whole number
            of milliseconds from 0.
    """
    if type(busy_timeout_ms) is not int or busy_timeout_ms < 0:
        msg = f"busy_timeout_ms must be a whole number from 0, got {busy_timeout_ms!r}"
        raise ConfigurationError(msg)
    try:
        return os.fspath(path)
    except TypeError:
        msg = f"an SQLite store needs a file path or ':memory:', got {type(path).__name__}"
        raise ConfigurationError(msg) from None


class _LockBusy(Exception):
    """Another process holds the write lock: retry on the worker thread."""


class SqliteConnection(WalCheckpoints):
    """The plumbing of ``SqliteStore``: one connection and its worker thread, opening and
    migration, and the inline-or-one-hop rule every read and write transaction follows."""

    def __init__(self, conn: Conn, worker: Worker, *, clock: Clock | None = None,
                 inline_writes: bool = False, busy_timeout_ms: int = 5000) -> None:
        self._conn, self._worker = conn, worker
        self._loop = asyncio.get_running_loop()
        self._clock = clock or utc_now
        self._lease_clock = self._clock  # ``open`` sets the lease timeline (``_lease_clock``)
        self._inline_writes = inline_writes
        self._busy_timeout_ms = busy_timeout_ms
        self._in_flight = 0  # submitted to the worker and not yet finished there
        self._background_checkpoints = False  # set by ``open`` (a file, inline writes)
        self._writes = 0  # write transactions since the last background checkpoint
        self._checkpointing = False  # one queued or running on the worker
        self._waiting_pragma = f"PRAGMA busy_timeout = {int(busy_timeout_ms)}"
        self._timeout_set = False  # the waiting timeout is on (worker thread only)
        self._reports = collections.deque()  # for ``_drain``
        self._wake_pending = False  # a ``_drain`` is scheduled on the loop
        self._idle_waiters: list[asyncio.Future[None]] = []  # see ``_worker_idle``
        self._closing = False

    @classmethod
    @asynccontextmanager
    async def open(
        cls, path: str | os.PathLike[str], *, clock: Clock | None = None,
        busy_timeout_ms: int = 5000, inline_writes: bool = True, read_only: bool = False,
        create: bool = True, refuse_foreign: bool = False, monotonic: Seconds | None = None,
        boot_id: str | None = None,
    ) -> AsyncIterator[Self]:
        """Open (creating if needed) and migrate the database, close it on exit.

        Files run in WAL mode with ``synchronous=NORMAL`` (a commit survives a crash of
        the process; after a power loss the last commits may be lost, never half of one);
        every connection has a busy timeout and enforces foreign keys. With inline
        writes (the default) the WAL is checkpointed on the worker thread every
        ``CHECKPOINT_EVERY`` writes, not inside a commit on the event loop's thread.

        Args:
            path: a file path, or ``":memory:"`` for a private in-memory database.
            clock: returns the current time (aware; naive values are taken as UTC).
            monotonic: the seconds leases run on (default ``CLOCK_BOOTTIME``), shared by
                the processes of one boot (``boot_id``, default the host's): no step of
                the wall clock moves a lease (``_lease_clock``). ``clock`` given alone
                keeps leases on ``clock``.
            boot_id: the boot ``monotonic`` counts from (tests).
            busy_timeout_ms: how long a write waits for another process's lock.
            read_only: open an existing file read-only (SQLite's ``mode=ro``), never
                creating or migrating it; its schema must be the current one.
            create: False opens an existing file for writing (``mode=rw``) but never
                creates or migrates it either: its schema must be the current one (an
                operator's command on a database a server made; ``turnstate release``).
            refuse_foreign: refuse a file that holds other tables and no turnstate
                schema instead of adding turnstate's beside them (``open_store``, the
                command line's and the server's opener, sets it: a mistyped ``--db``
                must not get turnstate's tables and WAL mode; an embedder may keep
                turnstate's tables in its application's own file).

        Raises:
            StorageError: the file cannot be opened, was written by a newer schema, or
                (``refuse_foreign``) holds other tables and no turnstate schema.
            ConfigurationError: ``path`` is not a path, or ``busy_timeout_ms`` is not a
                whole number from 0.
        """
        location = _location(path, busy_timeout_ms)
        worker = Worker()
        try:
            # check_same_thread=False: the inline path uses the connection from the event
            # loop's thread, strictly while the worker has nothing (``_in_flight == 0``).
            existing = read_only or not create
            mode = "ro" if read_only else "rw"
            target = f"file:{urllib.parse.quote(location)}?mode={mode}" if existing else location
            conn = await worker.call(lambda: sqlite3.connect(
                target, isolation_level=None, check_same_thread=False, uri=existing))
        except (sqlite3.Error, ValueError) as exc:  # ValueError: a NUL in the path
            worker.shutdown()
            msg = f"cannot open {location!r}: {exc}"
            raise StorageError(msg) from exc
        store: Self | None = None
        locks: list[int] = []  # a lock file without a boot id (``_lease_clock``)
        try:
            store = cls(conn, worker, clock=clock, inline_writes=inline_writes,
                        busy_timeout_ms=busy_timeout_ms)
            in_memory = location in {":memory:", ""}
            wal = not (in_memory or read_only)
            # checked before WAL is set: nothing written to a wrong file
            await store._run(lambda conn: q.configure(conn, busy_timeout_ms, wal=False))
            if existing:
                await store._run(require_current)
            elif refuse_foreign:
                await store._run(foreign_tables_refused)
            await store._run(lambda conn: q.configure(conn, busy_timeout_ms, wal=wal))
            if not existing:
                await store._run(migrate)
            store._lease_clock = await store._run(lambda conn: sqlite_lease_clock(
                conn, clock, monotonic, boot_id, write=not read_only, locks=locks))
            if not read_only:
                await store._run(q.create_turn_writes)
            if wal and inline_writes:
                await store._run(checkpoints_in_background)
                store._background_checkpoints = True
            yield store
        finally:
            if store is not None:  # the close is the worker's, counted like any hop: an
                if "turn_log" in store.__dict__:  # its watch first (``_sqlite_log``)
                    store.__dict__["turn_log"].stop_watching()
                store._in_flight += 1  # operation meanwhile never runs inline (refused)
                store._closing = True
                store._wake_idle_waiters()
            await store_closed(worker, conn)
            release_locks(locks)

    # -- test seam and plumbing --------------------------------------------------------

    def _checkpoint(self, name: str) -> None:
        """A no-op called on the writer thread at named points of every transaction.

        Names are ``<step>:<point>``: ``before`` (no transaction yet), ``begun`` (BEGIN
        done), one point after each statement, ``before_commit`` and ``committed``.
        Steps: ``begin``, ``transition``, ``commit``, ``abort``. The crash test overrides
        it to stop the process at an exact point; nothing else should.
        """

    async def _run(self, fn: Callable[[Conn], T]) -> T:
        """One hop, submitted behind the operations already waiting for the worker to
        be idle (``_worker_idle``): a stream of hops cannot keep them waiting."""
        if self._idle_waiters:
            await self._worker_idle()
        return await self._submitted(fn)

    async def _write(self, step: str, body: Callable[[Conn], T]) -> T:
        """Run one write transaction: inline when that is safe and fast, else as one hop.

        The inline path (``inline_writes``, on by default for ``open``) runs the whole
        transaction on the event loop's thread once nothing is in flight on the worker
        (waiting for it first: ``_worker_idle``), with a zero busy timeout: a short
        in-process transaction costs tens of microseconds, while a thread hop costs
        about a hundred here. If another process holds the write lock, the transaction
        goes to the worker thread, where it waits with the configured busy timeout
        instead of blocking the loop.
        """
        if await self._inline_turn():
            try:
                result = self._inline(lambda conn: self._transaction(conn, step, body))
            except _LockBusy:
                pass
            else:
                self._count_write()
                return result
        result = await self._submitted(lambda conn: self._transaction(conn, step, body))
        self._count_write()
        return result

    async def _write_one(self, step: str, sql: str, params: Sequence[Any],
                         points: tuple[str, ...]) -> bool:
        """Run one write statement that is its own transaction (SQLite's autocommit: no
        ``BEGIN`` or ``COMMIT`` statement), inline or as one hop as ``_write`` does.

        ``points`` are the step's checkpoint names between ``begun`` and
        ``before_commit``, all passed before the statement runs (nothing is written
        until it has run). False when the statement was refused (an ``IntegrityError``,
        such as a trigger's ``RAISE(ABORT)``): it wrote nothing, and the caller runs
        the transaction that decides.
        """
        def run(conn: Conn) -> bool:
            return self._statement(conn, step, sql, params, points)

        if await self._inline_turn():
            try:
                done = self._inline(run)
            except _LockBusy:
                pass
            else:
                if done:
                    self._count_write()
                return done
        done = await self._submitted(run)
        if done:
            self._count_write()
        return done

    def _statement(self, conn: Conn, step: str, sql: str, params: Sequence[Any],
                   points: tuple[str, ...]) -> bool:
        if type(self)._checkpoint is _NO_CHECKPOINTS:  # the seam unused: seven calls less
            try:
                conn.execute(sql, params)
            except sqlite3.IntegrityError:
                return False
            return True
        before, begun, before_commit, committed = _points(step)
        self._checkpoint(before)
        self._checkpoint(begun)
        for point in points:
            self._checkpoint(point)
        self._checkpoint(before_commit)
        try:
            conn.execute(sql, params)
        except sqlite3.IntegrityError:
            return False
        self._checkpoint(committed)
        return True

    async def _inline_turn(self) -> bool:
        """Whether the operation may now run inline: inline operations are on and the
        worker has nothing, once it has finished what it had (``_worker_idle``)."""
        if not self._inline_writes:
            return False
        if self._in_flight:
            await self._worker_idle()
        return self._in_flight == 0

    async def _worker_idle(self) -> None:
        """Wait until the worker has finished everything submitted (or the store closes).

        An operation that finds something in flight waits for the worker and then runs
        inline, instead of hopping: under load a hop made every later operation hop too
        (the queue never drained), each costing a thread crossing both ways. Woken, it
        runs inline only if still nothing is in flight, else it hops (no second wait).
        """
        if self._closing:
            return
        waiter: asyncio.Future[None] = self._loop.create_future()
        self._idle_waiters.append(waiter)
        await waiter

    async def _read(self, fn: Callable[[Conn], T]) -> T:
        """Run a one-statement read inline once nothing is in flight, else as one hop.

        The same rule as ``_write``: a read of one row costs a few microseconds on the
        event loop's thread and about a hundred as a hop. In WAL mode a reader is never
        blocked by another process's writer; a busy error (a checkpoint or recovery
        holding the file) sends the read to the worker thread instead.
        """
        if await self._inline_turn():
            try:
                return fn(self._conn)  # busy timeout 0 (``_waiting``)
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) and "busy" not in str(exc):
                    msg = f"sqlite: {exc}"
                    raise StorageError(msg) from exc
            except (sqlite3.Error, UnicodeEncodeError) as exc:  # as a hop reports them
                raise sqlite_error(exc) from exc
        return await self._submitted(fn)

    def _inline(self, run: Callable[[Conn], T]) -> T:
        conn = self._conn  # its busy timeout is 0 here (``_waiting``)
        try:
            return run(conn)
        except sqlite3.OperationalError as exc:
            if "locked" in str(exc) or "busy" in str(exc):
                raise _LockBusy from exc  # rolled back: nothing of it was written
            msg = f"sqlite: {exc}"
            raise StorageError(msg) from exc
        except (sqlite3.Error, UnicodeEncodeError) as exc:
            raise sqlite_error(exc) from exc

    def _transaction(self, conn: Conn, step: str, body: Callable[[Conn], T]) -> T:
        before, begun, before_commit, committed = _points(step)
        self._checkpoint(before)
        conn.execute("BEGIN IMMEDIATE")
        try:
            self._checkpoint(begun)
            result = body(conn)
            self._checkpoint(before_commit)
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.rollback()
            raise
        self._checkpoint(committed)
        return result

    async def fetch_raw(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Run one SQL statement and return its rows: for diagnostics and invariant checks."""
        return await self._run(lambda conn: conn.execute(sql, tuple(params)).fetchall())

    def _now(self) -> str:
        return format_ts(self._clock())

    def _lease_now(self) -> str:
        """Now on the lease timeline, to compare with a lease's expiry."""
        return format_ts(self._lease_clock())


_NO_CHECKPOINTS = SqliteConnection._checkpoint
"""The seam's no-op: a class that keeps it (every store but the crash test's) runs a
cursor turn's one-statement writes without calling it (issue 26)."""


@functools.cache
def _points(step: str) -> tuple[str, str, str, str]:
    """A step's four checkpoint names, built once per step (not four f-strings a write)."""
    return f"{step}:before", f"{step}:begun", f"{step}:before_commit", f"{step}:committed"
