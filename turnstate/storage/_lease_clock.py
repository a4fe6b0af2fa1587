"""The clock leases run on in ``MemoryStore`` and ``SqliteStore``: one no wall-clock step moves.

A lease's expiry and every comparison with it (a begin finding the chat busy, a reclaim,
an edit refused while a turn runs) read a *lease timeline*: seconds of a monotonic clock
plus a fixed offset, given as UTC datetimes, so the stored texts keep their form and
order. The offset puts the timeline on the wall clock when it is fixed; a later step of
the wall clock (NTP, a VM's resume, ``date -s``) moves displayed times (``created_at``,
``updated_at``: still the wall clock) but no lease, and an expiry shown then differs from
the wall clock by the step.

- ``MemoryStore``: one process; ``time.monotonic()`` and the offset taken at its creation.
- ``SqliteStore``: processes of one host share a file (WAL), so they share the timeline:
  ``CLOCK_BOOTTIME`` (it counts a suspended host's time, as leases must) and an offset
  kept in the file per boot (``lease_clock``, schema version 11). The first process of a
  boot writes it (``sqlite_offset``) and marks every lease written before as expired now:
  its holder died with the old boot. Without a boot id (no ``/proc``) the offset is kept
  per *generation* instead (``generation_offset``): the processes that have had the file
  open without a break, each holding a lock file beside it (``<db>-leases``) shared. A
  store that finds nobody else holding it (tried exclusive, inside the write lock that
  fixes the offset) knows every lease in the file is a dead process's: it fixes a new
  offset and expires them all, as a new boot does. A reboot ends every holder, so a
  generation never spans two boots. Without ``fcntl`` (Windows) or a file (``:memory:``)
  leases stay on the wall clock.

An injected wall ``clock`` alone (tests that step time) keeps leases on that clock.
"""

from __future__ import annotations

import os
import sqlite3
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime

from turnstate.storage._records import Clock, format_ts

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: no lock file, the wall clock
    fcntl = None  # type: ignore[assignment]

Seconds = Callable[[], float]
"""A monotonic clock's reading in seconds."""

BOOT_ID_PATH = "/proc/sys/kernel/random/boot_id"

_BOOTTIME = getattr(time, "CLOCK_BOOTTIME", None)


def boot_seconds() -> float:
    """Seconds since the host booted (``CLOCK_BOOTTIME`` where there is one, counting
    suspended time; else ``time.monotonic``), alike in every process of the host."""
    if _BOOTTIME is not None:
        return time.clock_gettime(_BOOTTIME)
    return time.monotonic()  # pragma: no cover - Linux has CLOCK_BOOTTIME


def read_boot_id(path: str = BOOT_ID_PATH) -> str | None:
    """The host's boot id (new at every boot), or None where the system has none."""
    try:
        with open(path, encoding="ascii") as file:
            return file.read().strip() or None
    except (OSError, ValueError):
        return None


def lease_timeline(seconds: Seconds, offset: float) -> Clock:
    """A clock giving ``seconds() + offset`` as an aware UTC datetime."""
    stamp = datetime.fromtimestamp

    def now() -> datetime:
        return stamp(seconds() + offset, UTC)

    return now


def memory_lease_clock(clock: Clock | None, monotonic: Seconds | None) -> Clock:
    """``MemoryStore``'s lease clock: ``monotonic`` (default ``time.monotonic``) put on the
    wall clock now; an injected ``clock`` alone is used as it is."""
    if monotonic is None:
        if clock is not None:
            return clock
        monotonic = time.monotonic
    wall = (clock or _utc_now)().timestamp()
    return lease_timeline(monotonic, wall - monotonic())


def _utc_now() -> datetime:
    return datetime.now(UTC)


_HAS_TABLE = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'lease_clock'"
_SELECT = "SELECT offset_seconds FROM lease_clock WHERE boot_id = ?"
_EXPIRE_OLD = """UPDATE chats SET active_turn_expires_at = ?
    WHERE active_turn_id IS NOT NULL AND active_turn_expires_at > ?"""


_CURRENT = "SELECT boot_id, offset_seconds FROM lease_clock"
GENERATION = "generation:"
"""How the key of an offset fixed without a boot id begins (``generation_offset``)."""
LOCK_SUFFIX = "-leases"
"""The lock file beside the database that a generation's stores hold shared."""


def sqlite_offset(conn: sqlite3.Connection, boot: str, seconds: Seconds, wall: Clock, *,
                  write: bool) -> float:
    """The file's lease offset for boot ``boot``: read, or fixed now (``write``: in one
    write transaction with the expiry of every lease a previous boot left)."""
    row = conn.execute(_SELECT, (boot,)).fetchone()
    if row is not None or not write:
        return float(row[0]) if row is not None else wall().timestamp() - seconds()
    conn.execute("BEGIN IMMEDIATE")
    try:
        row = conn.execute(_SELECT, (boot,)).fetchone()  # another process's, meanwhile
        offset = float(row[0]) if row is not None else _fix(conn, boot, seconds, wall)
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return offset


def _fix(conn: sqlite3.Connection, key: str, seconds: Seconds, wall: Clock, *,
         expire: bool = True) -> float:
    """A new offset under ``key``, in the caller's write transaction: the wall clock now,
    every lease still in the new timeline's future expired now (``expire``)."""
    offset = wall().timestamp() - seconds()
    if expire:
        now = format_ts(lease_timeline(seconds, offset)())
        conn.execute(_EXPIRE_OLD, (now, now))
    conn.execute("DELETE FROM lease_clock")
    conn.execute("INSERT INTO lease_clock (boot_id, offset_seconds) VALUES (?, ?)",
                 (key, offset))
    return offset


def generation_offset(conn: sqlite3.Connection, seconds: Seconds, wall: Clock,
                      locks: list[int]) -> float | None:
    """Without a boot id: the offset of the file's generation (see the module's
    docstring), joined, or fixed anew by a store alone on the file; the lock file's
    descriptor, held shared, is appended to ``locks`` (``release_locks`` closes it).
    None without ``fcntl`` or for an in-memory database."""
    path = conn.execute("PRAGMA database_list").fetchone()[2]
    if fcntl is None or not path:
        return None
    fd = os.open(path + LOCK_SUFFIX, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        conn.execute("BEGIN IMMEDIATE")  # no other store is between its two locks now
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                alone = True
            except BlockingIOError:
                alone = False
            row = None if alone else conn.execute(_CURRENT).fetchone()
            offset = float(row[1]) if row is not None else _fix(
                conn, GENERATION + uuid.uuid4().hex, seconds, wall, expire=alone)
            fcntl.flock(fd, fcntl.LOCK_SH)  # from exclusive, or beside the others' shares
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
    except BaseException:
        os.close(fd)
        raise
    locks.append(fd)
    return offset


def release_locks(locks: list[int]) -> None:
    """Close the lock files a store held (its generation goes on without it)."""
    while locks:
        os.close(locks.pop())


def sqlite_lease_clock(conn: sqlite3.Connection, clock: Clock | None,
                       monotonic: Seconds | None, boot_id: str | None, *,
                       write: bool, locks: list[int] | None = None) -> Clock:
    """``SqliteStore``'s lease clock (see the module's docstring); runs on its worker.
    ``locks``: where a writing store without a boot id keeps its lock file."""
    if monotonic is None:
        if clock is not None:
            return clock
        monotonic = boot_seconds
    if conn.execute(_HAS_TABLE).fetchone() is None:  # (tests: an old schema)
        return clock or _utc_now
    boot = boot_id if boot_id is not None else read_boot_id()
    wall = clock or _utc_now
    if boot is not None:
        return lease_timeline(monotonic, sqlite_offset(conn, boot, monotonic, wall,
                                                       write=write))
    if write and locks is not None:
        offset = generation_offset(conn, monotonic, wall, locks)
    else:  # a reader: the generation's offset if there is one
        row = conn.execute(_CURRENT).fetchone()
        offset = float(row[1]) if row is not None and str(row[0]).startswith(
            GENERATION) else None
    return wall if offset is None else lease_timeline(monotonic, offset)
