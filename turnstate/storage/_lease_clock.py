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
  its holder died with the old boot. Without a boot id (no ``/proc``) leases stay on the
  wall clock, as before.

An injected wall ``clock`` alone (tests that step time) keeps leases on that clock.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from datetime import UTC, datetime

from turnstate.storage._records import Clock, format_ts

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
        if row is None:
            offset = wall().timestamp() - seconds()
            now = format_ts(lease_timeline(seconds, offset)())
            conn.execute(_EXPIRE_OLD, (now, now))
            conn.execute("DELETE FROM lease_clock")
            conn.execute("INSERT INTO lease_clock (boot_id, offset_seconds) VALUES (?, ?)",
                         (boot, offset))
        else:
            offset = float(row[0])
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return offset


def sqlite_lease_clock(conn: sqlite3.Connection, clock: Clock | None,
                       monotonic: Seconds | None, boot_id: str | None, *,
                       write: bool) -> Clock:
    """``SqliteStore``'s lease clock (see the module's docstring); runs on its worker."""
    if monotonic is None:
        if clock is not None:
            return clock
        monotonic = boot_seconds
    boot = boot_id if boot_id is not None else read_boot_id()
    if boot is None or conn.execute(_HAS_TABLE).fetchone() is None:  # (tests: an old schema)
        return clock or _utc_now
    return lease_timeline(monotonic, sqlite_offset(conn, boot, monotonic, clock or _utc_now,
                                                   write=write))
