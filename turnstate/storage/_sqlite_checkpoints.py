"""The WAL checkpoints of ``SqliteConnection`` (``_sqlite_conn``): run on the worker
thread every ``CHECKPOINT_EVERY`` writes instead of inside an inline ``COMMIT``, and the
WAL's restart after a whole one.

``WalCheckpoints`` is a mixin over ``WorkerHops``: the connection's fields are its state.
"""

from __future__ import annotations

import sqlite3

from turnstate.storage._sqlite_hops import Conn, WorkerHops

CHECKPOINT_EVERY = 256
"""Write transactions between two background checkpoints (a cursor turn writes two of
about eight pages each: about 2,000 pages, half the backstop). A checkpoint copies each
page once however often it changed, so fewer, larger ones copy less per turn: 13 us of
the worker's CPU a cursor turn at 256 writes, 30 us at 64 (issue 26)."""
CHECKPOINT_BACKSTOP = 4000
"""``wal_autocheckpoint`` (pages) of a connection whose checkpoints run in the background:
reached only when they fall behind (a burst of large writes), as a bound on the WAL."""


class WalCheckpoints(WorkerHops):
    """Background checkpoints of an inline-writing connection (see the module docstring)."""

    _background_checkpoints: bool
    _writes: int
    _checkpointing: bool

    def _count_write(self) -> None:
        """Every ``CHECKPOINT_EVERY`` writes, a checkpoint on the worker thread.

        SQLite's automatic checkpoint runs inside the ``COMMIT`` that crosses its page
        count, so on the inline path it stalled the event loop for 1-4 ms every few
        dozen turns (issue 26). The worker runs it instead, on the store's connection
        and counted like any hop, so operations arriving meanwhile queue behind it on
        the worker instead of running inline. That way nothing writes while it runs, it
        copies the whole WAL, and the next write starts the WAL over from its beginning:
        a checkpoint on a connection of its own raced the inline writes, never caught up
        with them under a steady stream of turns, and left the WAL to grow to the
        backstop, where SQLite's own checkpoint ran inside an inline ``COMMIT`` after all.
        """
        if not self._background_checkpoints:
            return
        self._writes += 1
        if self._writes >= CHECKPOINT_EVERY and not self._checkpointing:
            self._writes, self._checkpointing = 0, True
            self._in_flight += 1  # lowered by ``_checkpointed``, on the loop
            self._worker.submit(self._background_checkpoint)

    def _background_checkpoint(self) -> None:
        """On the worker thread: a ``PASSIVE`` checkpoint (it waits on no lock: another
        process's writer or reader only leaves part of the WAL for the next one), then,
        when it copied the whole WAL, the WAL's restart (``_restart_wal``)."""
        try:
            self._unwait()  # hops queued before it may have left the waiting timeout
            (_, logged, copied) = self._conn.execute(
                "PRAGMA wal_checkpoint(PASSIVE)").fetchone()
            if logged > 0 and copied == logged:
                _restart_wal(self._conn)
        except sqlite3.Error:
            pass  # the backstop still checkpoints; the next interval tries again
        finally:
            self._loop.call_soon_threadsafe(self._checkpointed)

    def _checkpointed(self) -> None:
        self._in_flight -= 1
        self._checkpointing = False
        if self._in_flight == 0 and self._idle_waiters:
            self._wake_idle_waiters()


def _restart_wal(conn: Conn) -> None:
    """Start the WAL over now, on the worker: one write of the value ``user_version``
    already holds (page 1, one frame; nothing changes).

    The first write after a whole checkpoint starts the WAL over, and SQLite then writes
    the WAL's header and syncs it (``fdatasync``; at any ``synchronous`` but ``OFF``,
    so that a restart cannot be reordered with later frames). Left to the next
    operation, that sync ran inside an inline ``COMMIT`` on the event loop's thread:
    2-6 ms every ``CHECKPOINT_EVERY`` writes here (issue 26). With a zero busy
    timeout, another process's write lock only leaves the restart to the next write.
    """
    conn.execute("BEGIN IMMEDIATE")
    try:
        (version,) = conn.execute("PRAGMA user_version").fetchone()
        conn.execute(f"PRAGMA user_version = {int(version)}")
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.rollback()
        raise


def checkpoints_in_background(conn: Conn) -> None:
    """Raise the connection's automatic checkpoint to the backstop (the worker runs the
    regular ones)."""
    conn.execute(f"PRAGMA wal_autocheckpoint = {CHECKPOINT_BACKSTOP}")
