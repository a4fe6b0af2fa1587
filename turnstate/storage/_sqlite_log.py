"""``SqliteStore``'s turn-events log: the ``turn_logs`` and ``turn_events`` tables.

An append is one write transaction (the header row advanced by one upsert, the batch
inserted with one ``executemany``), run like every other write of the store;
``append_many`` writes several turns' batches in one transaction the same way. One process serves an
SQLite file, so readers are woken in-process (``TurnSignals``), never by polling.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime

from turnstate.core._errors import StorageError, TurnNotFound
from turnstate.storage._protocol import TurnRecord, TurnStatus
from turnstate.storage._records import format_ts, utf8_safe
from turnstate.storage._rows import TURN_COLUMNS, turn_from_row
from turnstate.storage._sqlite_conn import Conn, SqliteConnection
from turnstate.storage._turn_log import (
    LogBatch,
    LoggedEvent,
    TurnLogPage,
    TurnSignals,
    check_batch,
)

_TURN = ", ".join(f"t.{name}" for name in TURN_COLUMNS)
SELECT_TURN = f"""SELECT {_TURN}, c.owner, l.last_id, l.truncated, l.expired,
    l.stop_requested_at FROM turns t JOIN chats c ON c.id = t.chat_id
    LEFT JOIN turn_logs l ON l.turn_id = t.id WHERE t.id = ? AND t.chat_id = ?"""
SELECT_EVENTS = """SELECT id, type, data FROM turn_events WHERE turn_id = ? AND id > ?
    ORDER BY id LIMIT ?"""
UPSERT_HEADER = """INSERT INTO turn_logs (turn_id) VALUES (?) ON CONFLICT (turn_id) DO NOTHING"""
TOUCH_HEADER = """INSERT INTO turn_logs (turn_id) SELECT id FROM turns WHERE id = ?
    ON CONFLICT (turn_id) DO UPDATE SET turn_id = excluded.turn_id RETURNING turn_id"""
# Parameters: its new last id, truncate, the turn, the batch's first id: no row back when
# the turn is unknown or the batch does not follow the stored ids.
ADVANCE_HEADER = """INSERT INTO turn_logs AS l (turn_id, last_id, truncated)
    SELECT id, ?, ? FROM turns WHERE id = ?
    ON CONFLICT (turn_id) DO UPDATE SET last_id = excluded.last_id,
        truncated = l.truncated OR excluded.truncated WHERE l.last_id < ?
    RETURNING turn_id"""
INSERT_EVENT = "INSERT INTO turn_events (turn_id, id, type, data) VALUES (?, ?, ?, ?)"
# Driven by the unexpired logs (``turn_logs_unexpired``), each turn found by its key: the
# sweep reads the logs it may expire, not every turn ever run (issue 26).
EXPIRE_WHERE = """FROM turn_logs l WHERE expired = 0 AND EXISTS (SELECT 1 FROM turns t
    WHERE t.id = l.turn_id AND t.status != 'in_progress' AND t.ended_at < ?)"""


def _advance(conn: Conn, batch: LogBatch) -> None:
    """Move the turn's header past ``batch`` (and drop its events when it truncates), or
    raise what ``append`` raises, having written nothing."""
    turn_id, events = batch.turn_id, batch.events
    check_batch(events, 0)
    if events:
        written = conn.execute(ADVANCE_HEADER, (events[-1].id, int(batch.truncate), turn_id,
                                                events[0].id)).fetchone()
    else:
        written = conn.execute(TOUCH_HEADER, (turn_id,)).fetchone()
    if written is None:
        if conn.execute("SELECT 1 FROM turns WHERE id = ?", (turn_id,)).fetchone() is None:
            raise TurnNotFound(turn_id)
        (last_id,) = conn.execute("SELECT last_id FROM turn_logs WHERE turn_id = ?",
                                  (turn_id,)).fetchone()
        check_batch(events, last_id)  # raises: the header refused the batch for its ids
    if batch.truncate:
        conn.execute("DELETE FROM turn_events WHERE turn_id = ?", (turn_id,))
        if not events:  # else the header's advance marked it
            conn.execute("UPDATE turn_logs SET truncated = 1 WHERE turn_id = ?", (turn_id,))


class SqliteTurnLog:
    """The ``TurnLog`` of a ``SqliteStore``."""

    def __init__(self, store: SqliteConnection) -> None:
        self._store = store
        self._signals = TurnSignals()

    @property
    def signals(self) -> TurnSignals:
        return self._signals

    async def append(self, turn_id: str, events: Sequence[LoggedEvent], *,
                     truncate: bool = False) -> None:
        (outcome,) = await self.append_many((LogBatch(turn_id, tuple(events), truncate),))
        if outcome is not None:
            raise outcome

    async def append_many(self, batches: Sequence[LogBatch]) -> tuple[StorageError | None, ...]:
        """One write transaction for every batch: per batch one statement that advances
        its header (refusing ids that do not follow), then every event row at once."""

        def body(conn: Conn) -> tuple[StorageError | None, ...]:
            rows: list[tuple[str, int, str, str]] = []
            outcomes: list[StorageError | None] = []
            for batch in batches:
                try:
                    _advance(conn, batch)
                except StorageError as exc:
                    outcomes.append(exc)
                    continue
                outcomes.append(None)
                rows.extend((batch.turn_id, e.id, e.type, utf8_safe(e.data))
                            for e in batch.events)
            conn.executemany(INSERT_EVENT, rows)
            return tuple(outcomes)

        outcomes = await self._store._write("log", body)
        for batch, outcome in zip(batches, outcomes, strict=True):
            if outcome is None:
                self._signals.changed(batch.turn_id)
        return outcomes

    async def read(self, chat_id: str, turn_id: str, *, after: int = 0,
                   owner: str | None = None, limit: int | None = None) -> TurnLogPage:
        count = -1 if limit is None else limit

        def load(conn: Conn) -> TurnLogPage:
            row = conn.execute(SELECT_TURN, (turn_id, chat_id)).fetchone()
            if row is None or (owner is not None and row[15] != owner):
                raise TurnNotFound(turn_id)
            events = conn.execute(SELECT_EVENTS, (turn_id, after, count)).fetchall()
            return TurnLogPage(turn=turn_from_row(row[:15]),
                               events=tuple(LoggedEvent(*e) for e in events),
                               last_id=row[16] or 0, truncated=bool(row[17]),
                               expired=bool(row[18]), stop_requested=row[19] is not None)

        return await self._store._run(load)

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

    async def expire(self, ended_before: datetime) -> int:
        cutoff = format_ts(ended_before)

        def body(conn: Conn) -> int:
            doomed = [row[0] for row in conn.execute(f"SELECT turn_id {EXPIRE_WHERE}",
                                                     (cutoff,))]
            for turn_id in doomed:
                conn.execute("DELETE FROM turn_events WHERE turn_id = ?", (turn_id,))
                conn.execute("UPDATE turn_logs SET expired = 1 WHERE turn_id = ?", (turn_id,))
            return len(doomed)

        return await self._store._write("expire", body)
