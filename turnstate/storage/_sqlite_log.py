"""``SqliteStore``'s turn-events log: the ``turn_event_batches`` and ``turn_logs`` tables.

An append is one write transaction: per batch, one read of the turn's last id (refusing
ids that do not follow) and one row inserted, the batch's first and last ids and its
events as one JSON value (``pack_events``; schema version 8: it was one row per event
and a header upsert per append, issue 26); a batch of more than ``STORED_EVENTS`` events
is stored in rows of that many (``pack_rows``, follow12). ``append_many`` writes several turns'
batches in one transaction the same way, run like every other write of the store.

A turn's ``turn_logs`` header row is written only when there is something to remember
beside the batches: a truncation, a stop request, an expiry (then ``last_id`` keeps the
last id of the events it dropped). A log's last id is the larger of the header's and its
last batch's. Readers are woken in-process (``TurnSignals``) by this process's appends;
another process's (two ``turnstate serve`` on one file) are seen by a watch that, while
readers read the log, checks the file's ``PRAGMA data_version`` every ``WATCH_SECONDS``
and wakes them all when it moved (before, they waited for their 2 s poll: a turn
resumed on the other process came in 2-second bursts). The same watch runs while turns
of this process append (until their final event) and signals a stop another process
asked of one of them (``signals.stop_requested``), within ``WATCH_SECONDS`` instead of
the runner's 2 s poll of ``stop_requests``, and one whose lease another process took
(``signals.fenced``: a release, a reclaim) instead of at the turn's next renewal.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Collection, Sequence
from datetime import datetime, timedelta

from turnstate.core._errors import StorageError, TurnNotFound
from turnstate.storage._protocol import TurnRecord, TurnStatus
from turnstate.storage._record_checks import check_limit
from turnstate.storage._records import format_ts
from turnstate.storage._rows import TURN_COLUMNS, turn_from_row
from turnstate.storage._sqlite_conn import Conn, SqliteConnection
from turnstate.storage._turn_log import (
    FENCED_REASONS,
    LogBatch,
    LoggedEvent,
    TurnLogFenced,
    TurnLogPage,
    TurnSignals,
    check_batch,
    check_fence,
    expire_cutoff,
    pack_rows,
    unpack_events,
)


def _last_id(turn: str) -> str:
    """SQL for the last event id of the log of ``turn`` (an SQL expression), 0 if none."""
    return f"""max(coalesce((SELECT max(b.last_id) FROM turn_event_batches b
        WHERE b.turn_id = {turn}), 0),
    coalesce((SELECT h.last_id FROM turn_logs h WHERE h.turn_id = {turn}), 0))"""


_TURN = ", ".join(f"t.{name}" for name in TURN_COLUMNS)
SELECT_TURN = f"""SELECT {_TURN}, c.owner, {_last_id("t.id")}, l.truncated, l.expired,
    l.stop_requested_at, t.attached FROM turns t JOIN chats c ON c.id = t.chat_id
    LEFT JOIN turn_logs l ON l.turn_id = t.id WHERE t.id = ? AND t.chat_id = ?"""
# A batch holding an event above ``after`` has its last id above it, and each holds one
# event at least, so ``limit`` batches hold ``limit`` events. Parameters: the turn, after,
# the turn, ``after + limit`` and ``NO_REACH`` (no limit: both ``NO_REACH``), the limit
# or -1. None is read past the first batch that reaches id ``after + limit`` (a batch
# of many events is not read ``limit`` times over, follow12): ids follow one another
# (but where the cap dropped events: there a page holds fewer, never none).
SELECT_EVENTS = """SELECT events FROM turn_event_batches WHERE turn_id = ? AND last_id > ?
    AND last_id <= coalesce((SELECT min(last_id) FROM turn_event_batches
        WHERE turn_id = ? AND last_id >= ?), ?)
    ORDER BY last_id LIMIT ?"""
NO_REACH = 2 ** 62
"""Above any event id: the reach of a read without a limit."""
# No row back for an unknown turn.
SELECT_LAST_ID = f"SELECT {_last_id('t.id')}, t.status, t.reason FROM turns t WHERE t.id = ?"
UPSERT_HEADER = """INSERT INTO turn_logs (turn_id) VALUES (?) ON CONFLICT (turn_id) DO NOTHING"""
# Parameters: the turn, the log's last id before the truncating batch.
TRUNCATE_HEADER = """INSERT INTO turn_logs (turn_id, last_id, truncated) VALUES (?, ?, 1)
    ON CONFLICT (turn_id) DO UPDATE SET last_id = excluded.last_id, truncated = 1"""
INSERT_BATCH = """INSERT INTO turn_event_batches (turn_id, first_id, last_id, events)
    VALUES (?, ?, ?, ?)"""
DELETE_EVENTS = "DELETE FROM turn_event_batches WHERE turn_id = ?"
EXPIRE_HEADER = f"""INSERT INTO turn_logs (turn_id, last_id, expired)
    SELECT t.id, {_last_id("t.id")}, 1 FROM turns t WHERE t.id = ?
    ON CONFLICT (turn_id) DO UPDATE SET last_id = excluded.last_id, expired = 1"""
_ENDED = """EXISTS (SELECT 1 FROM turns t WHERE t.id = {turn} AND t.status != 'in_progress'
    AND t.ended_at < ?)"""
# The logs the sweep may expire: the turns that have batches (each turn found by its
# key: the sweep reads the logs kept, not every turn ever run, issue 26) and the few
# unexpired headers (``turn_logs_unexpired``: a stop or a truncation with no batch left).
# A log expired once is not again (nor are the batches appended to it since).
EXPIRE_DOOMED = f"""SELECT b.turn_id FROM (SELECT DISTINCT turn_id FROM turn_event_batches) b
    WHERE {_ENDED.format(turn="b.turn_id")} AND NOT EXISTS (SELECT 1 FROM turn_logs h
        WHERE h.turn_id = b.turn_id AND h.expired)
    UNION SELECT l.turn_id FROM turn_logs l WHERE l.expired = 0
    AND {_ENDED.format(turn="l.turn_id")}"""


STOPS_OF = """SELECT t.id, t.status, l.stop_requested_at, t.reason FROM turns t
    LEFT JOIN turn_logs l ON l.turn_id = t.id WHERE t.id IN ({marks})"""
"""The turns running here: their status, stop request and ending (``_signal_stops``)."""
DATA_VERSION = "PRAGMA data_version"
WATCH_SECONDS = 0.05
"""How often the watch looks for another process's writes: the writer's own period."""
WATCH_IDLE_SECONDS = 3.0
"""The watch stops when no read came for this long (a follower reads at least every
2 s, its poll)."""


def _advance(conn: Conn, batch: LogBatch) -> None:
    """Check that ``batch``'s turn holds its lease still (``check_fence``) and that the
    batch follows the turn's stored ids (and drop its events when it truncates), or
    raise what ``append`` raises, having written nothing."""
    turn_id, events = batch.turn_id, batch.events
    row = conn.execute(SELECT_LAST_ID, (turn_id,)).fetchone()
    if row is None:
        raise TurnNotFound(turn_id)
    check_fence(turn_id, row[1], row[2])  # in the append's own transaction
    check_batch(events, row[0])
    if batch.truncate:
        conn.execute(DELETE_EVENTS, (turn_id,))
        conn.execute(TRUNCATE_HEADER, (turn_id, row[0]))


def _data_version(conn: Conn) -> int:
    version: int = conn.execute(DATA_VERSION).fetchone()[0]
    return version


class SqliteTurnLog:
    """The ``TurnLog`` of a ``SqliteStore``."""

    def __init__(self, store: SqliteConnection) -> None:
        self._store = store
        self._signals = TurnSignals()
        self._watch: asyncio.Task[None] | None = None  # another process's writes
        self._read_at = 0.0  # the loop's time of the last read, for the watch
        self._running: set[str] = set()  # turns appending here, for another's stop
        self._unchecked = False  # a turn joined ``_running``: check its stop at once

    @property
    def signals(self) -> TurnSignals:
        return self._signals

    async def append(self, turn_id: str, events: Sequence[LoggedEvent], *,
                     truncate: bool = False) -> None:
        (outcome,) = await self.append_many((LogBatch(turn_id, tuple(events), truncate),))
        if outcome is not None:
            raise outcome

    async def append_many(self, batches: Sequence[LogBatch]) -> tuple[StorageError | None, ...]:
        """One write transaction for every batch: per batch one read of its turn's last
        id (refusing ids that do not follow), then every batch's row at once (a turn's
        rows written before its next batch is read, when it has several)."""

        def body(conn: Conn) -> tuple[StorageError | None, ...]:
            rows: list[tuple[str, int, int, str]] = []
            outcomes: list[StorageError | None] = []
            turns: set[str] = set()
            for batch in batches:
                if batch.turn_id in turns:  # a turn's later batch: its earlier ones first
                    conn.executemany(INSERT_BATCH, rows)
                    rows.clear()
                    turns.clear()
                turns.add(batch.turn_id)
                try:
                    _advance(conn, batch)
                except StorageError as exc:
                    outcomes.append(exc)
                    continue
                outcomes.append(None)
                rows.extend((batch.turn_id, first, last, packed)
                            for first, last, packed in pack_rows(batch.events))
            conn.executemany(INSERT_BATCH, rows)
            return tuple(outcomes)

        outcomes = await self._store._write("log", body)
        running = self._running
        for batch, outcome in zip(batches, outcomes, strict=True):
            turn_id = batch.turn_id
            if outcome is None:
                self._signals.changed(turn_id)
                if batch.events and batch.events[-1].final:
                    running.discard(turn_id)
                elif turn_id not in running:
                    running.add(turn_id)
                    self._unchecked = True
                    self._watched(None)
            elif isinstance(outcome, TurnLogFenced | TurnNotFound):
                running.discard(turn_id)  # it appends no more
        return outcomes

    async def read(self, chat_id: str, turn_id: str, *, after: int = 0,
                   owner: str | None = None, limit: int | None = None) -> TurnLogPage:
        check_limit(limit)
        count = -1 if limit is None else limit
        reach = NO_REACH if limit is None else after + limit

        def load(conn: Conn) -> tuple[int, TurnLogPage]:
            row = conn.execute(SELECT_TURN, (turn_id, chat_id)).fetchone()
            if row is None or (owner is not None and row[15] != owner):
                raise TurnNotFound(turn_id)
            batches = conn.execute(SELECT_EVENTS, (turn_id, after, turn_id, reach, NO_REACH,
                                                   count)).fetchall()
            return _data_version(conn), TurnLogPage(
                turn=turn_from_row(row[:15]),
                events=unpack_events((b for (b,) in batches), after, limit),
                last_id=row[16] or 0, truncated=bool(row[17]), expired=bool(row[18]),
                stop_requested=row[19] is not None, attached=bool(row[20]))

        version, page = await self._store._run(load)
        self._watched(version)  # the reader may wait next: wake it for other processes
        return page

    def watch_held(self) -> None:
        """A turn starts here (``_lease.fence_watch``, lifecycle6): keep the watch
        running while the engines here hold turns (``signals.held``), so that another
        process's release or reclaim of one (``run_turn`` turns log nothing) stops it
        within ``WATCH_SECONDS``. A started watch looks once at once; a running one
        costs the turn nothing more."""
        if self._store._closing:  # a closed store polls nothing (the task would outlive it)
            return
        if self._watch is None or self._watch.done():
            self._unchecked = True
            self._watch = asyncio.get_running_loop().create_task(
                self._watching(None), name="sqlite turn-log watch")

    def _watched(self, version: int | None) -> None:
        """Keep the watch running from a read that saw ``version`` (None: an append of
        a turn running here): a running watch compares with what it saw last (a write
        since wakes this reader at its next look), a new one with this read's."""
        loop = asyncio.get_running_loop()
        if version is not None:
            self._read_at = loop.time()
        if self._store._closing:
            return
        if self._watch is None or self._watch.done():
            self._watch = loop.create_task(self._watching(version),
                                           name="sqlite turn-log watch")

    async def _watching(self, seen: int | None) -> None:
        """While readers read, or turns append here: every ``WATCH_SECONDS`` the file's
        ``data_version``; when another connection wrote, wake the readers and look for
        stops asked of the turns running here (the other process's ``request_stop``,
        which reached them at the runner's 2 s poll before)."""
        loop = asyncio.get_running_loop()
        checked, signals = loop.time(), self._signals
        with contextlib.suppress(Exception):  # the store closed or failing: the next
            while (loop.time() - self._read_at < WATCH_IDLE_SECONDS  # read, append or
                   or self._running or signals.holding()):  # turn start restarts it
                await asyncio.sleep(WATCH_SECONDS)  # the polling period
                version = await self._store._read(_data_version)
                moved = seen is not None and version != seen
                if moved:
                    signals.changed_all()
                if (moved or self._unchecked or loop.time() - checked >= WATCH_IDLE_SECONDS
                        ) and (self._running or signals.holding()):
                    self._unchecked, checked = False, loop.time()
                    await self._signal_stops()  # (now and then: turns that ended unlogged)
                seen = version

    async def _signal_stops(self) -> None:
        """Signal the stops asked of turns running here; forget the turns that ended."""
        running = set(self._running)
        ids = list(running | self._signals.held())  # held: ``run_turn`` turns, for fences
        sql = STOPS_OF.format(marks=", ".join("?" * len(ids)))
        rows = await self._store._run(lambda conn: conn.execute(sql, ids).fetchall())
        found = {turn_id for turn_id, _, _, _ in rows}
        self._running.difference_update(running - found)  # deleted meanwhile
        for turn_id, status, stop, reason in rows:
            if turn_id in running and (status != TurnStatus.IN_PROGRESS.value
                                       or stop is not None):
                self._running.discard(turn_id)
            if (turn_id in running and status == TurnStatus.IN_PROGRESS.value
                    and stop is not None):
                self._signals.stop_requested(turn_id)
            elif status == TurnStatus.ABORTED.value and reason in FENCED_REASONS:
                self._signals.fenced(turn_id)  # another process took it (a release)

    def stop_watching(self) -> None:
        """The store closes: the watch ends."""
        if self._watch is not None:
            self._watch.cancel()

    async def request_stop(self, chat_id: str, turn_id: str, *,
                           owner: str | None = None) -> TurnRecord:
        now = self._store._now()

        def body(conn: Conn) -> TurnRecord:
            row = conn.execute(SELECT_TURN, (turn_id, chat_id)).fetchone()
            if row is None or (owner is not None and row[15] != owner):
                raise TurnNotFound(turn_id)
            record = turn_from_row(row[:15])
            if record.status is TurnStatus.IN_PROGRESS:
                conn.execute(UPSERT_HEADER, (turn_id,))
                conn.execute("""UPDATE turn_logs SET stop_requested_at = ? WHERE turn_id = ?
                    AND stop_requested_at IS NULL""", (now, turn_id))
            return record

        record = await self._store._write("stop", body)
        if record.status is TurnStatus.IN_PROGRESS:
            self._signals.stop_requested(turn_id)
        return record

    async def stop_requests(self, turn_ids: Collection[str]) -> frozenset[str]:
        ids = list(turn_ids)
        if not ids:
            return frozenset()
        marks = ", ".join("?" * len(ids))
        sql = (f"SELECT turn_id FROM turn_logs WHERE turn_id IN ({marks}) "
               "AND stop_requested_at IS NOT NULL")
        rows = await self._store._run(lambda conn: conn.execute(sql, ids).fetchall())
        return frozenset(row[0] for row in rows)

    async def expire(self, ended_before: datetime | None = None, *,
                     older_than: timedelta | None = None) -> int:
        at = expire_cutoff(ended_before, older_than, self._store._clock)
        cutoff = format_ts(at)

        def body(conn: Conn) -> int:
            doomed = [row[0] for row in conn.execute(EXPIRE_DOOMED, (cutoff, cutoff))]
            for turn_id in doomed:
                conn.execute(EXPIRE_HEADER, (turn_id,))
                conn.execute(DELETE_EVENTS, (turn_id,))
            return len(doomed)

        return await self._store._write("expire", body)
