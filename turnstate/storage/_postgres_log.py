"""``PostgresStore``'s turn-events log, and the ``LISTEN/NOTIFY`` that wakes other nodes.

Schema version 6 adds ``turn_logs`` (a header row per logged turn) and ``turn_events``,
both deleted with their turn; version 9 (``V9``, issue 26) replaces ``turn_events`` (a
row per event) with ``turn_event_batches``: a row per write of a turn, its first and last
ids and its events as one JSON value (``pack_events``; a write of more than
``STORED_EVENTS`` events takes rows of that many, ``pack_rows``: follow12). An append is
one statement: the header upserted (refusing ids that do not follow the stored ones), the
batch inserted, and a
``pg_notify`` on the channel ``turnstate`` whose payload names the schema, the kind
(``e`` events, ``s`` a stop request, ``f`` a turn whose lease was taken from it:
``announce_fenced``) and the turn. The notification is delivered when
the statement's transaction commits, so a woken reader always finds the rows.
``append_many`` writes several turns' batches the same way in one statement.

Each store listens on one dedicated connection (not a pooled one), opened on first
need. A notification for this store's schema calls the in-process ``TurnSignals``; if
the listening connection is lost, readers and stop checks fall back to their polling
period until the next ``listen`` reopens it. Opening it is optional (polling covers for
it) and sits on a turn's start, so it is bounded by ``LISTEN_SECONDS`` and made once at
a time: the turns that start meanwhile wait for that one attempt.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Collection, Sequence
from datetime import datetime, timedelta
from typing import Any

import asyncpg

from turnstate.core._errors import StorageError, TurnNotFound
from turnstate.storage import _postgres_sql as q
from turnstate.storage._postgres_log_sql import (
    ANNOUNCE_FENCED,
    APPEND,
    APPEND_MANY,
    EXPIRE,
    READ,
    REQUEST_STOP,
    STOP_REQUESTS,
    TRUNCATE,
)
from turnstate.storage._protocol import TurnRecord, TurnStatus
from turnstate.storage._record_checks import check_limit
from turnstate.storage._turn_log import (
    LogBatch,
    LoggedEvent,
    TurnLogFenced,
    TurnLogPage,
    TurnSignals,
    check_batch,
    expire_cutoff,
    pack_rows,
    unpack_events,
)

_LOG = logging.getLogger("turnstate")
CHANNEL = "turnstate"
RELISTEN_SECONDS = 30.0
RELISTEN_FIRST = 0.1
"""Seconds before opening again a listening connection that was lost while turns ran
here (a database restart); then doubling up to ``RELISTEN_SECONDS``."""
LISTEN_SECONDS = 5.0
"""The most a ``listen`` waits for the listening connection (a silent server)."""

Connect = Callable[[], Awaitable[asyncpg.Connection]]
Call = Callable[..., Awaitable[list[asyncpg.Record]]]
"""The store's ``_call``: one statement with its retries and error translation."""


LISTEN_OPEN = "postgres listener open"
"""The name of the task opening the listening connection (a service of the store's)."""


class _OutOfOrder(StorageError):
    """A batch whose first id does not follow the stored ones (nothing of it written)."""


class PostgresTurnLog:
    """The ``TurnLog`` of a ``PostgresStore``; ``listen`` starts the notifications.

    Args:
        call: the store's ``_call`` (a statement, retried and translated as the store's).
        now: the store's injected clock (tests), None for the database's.
        connect: opens the listening connection (None: no notifications, polling only).
    """

    def __init__(self, call: Call, now: Callable[[], datetime | None],
                 connect: Connect | None = None) -> None:
        self._call, self._now, self._connect = call, now, connect
        self._signals = TurnSignals()
        self._listener: asyncpg.Connection | None = None
        self._schema: str | None = None
        self._failed_at = -RELISTEN_SECONDS
        self._opening: asyncio.Future[bool] | None = None
        self._relisten: asyncio.Task[None] | None = None  # after a lost listener
        self._closed = False

    @property
    def signals(self) -> TurnSignals:
        return self._signals

    @property
    def listening(self) -> bool:
        return self._listener is not None and not self._listener.is_closed()

    async def listen(self) -> bool:
        """Open the listening connection unless it is open; False when it cannot be
        (then not tried again for ``RELISTEN_SECONDS``: readers poll meanwhile)."""
        if self._closed:  # a closed store opens no connection (it would stay open)
            return False
        if self.listening or self._connect is None:
            return self.listening
        if time.monotonic() - self._failed_at < RELISTEN_SECONDS:
            return False
        if self._opening is None:  # one attempt at a time; the others wait for it
            self._opening = asyncio.get_running_loop().create_task(
                self._open(), name=LISTEN_OPEN)
            self._opening.add_done_callback(self._opened)
        return await asyncio.shield(self._opening)

    def watch_held(self) -> None:
        """A turn starts here (``_lease.fence_watch``, lifecycle6): listen, so that its
        release or reclaim by another node reaches it now (a ``run_turn`` turn's node
        listened only once it ran or followed a detached turn). Opened in the
        background, once (then kept, as ``listen`` keeps it); nothing when listening."""
        if self._closed or (self._listener is not None and not self._listener.is_closed()):
            return
        if (self._opening is None and self._connect is not None
                and time.monotonic() - self._failed_at >= RELISTEN_SECONDS):
            self._opening = asyncio.get_running_loop().create_task(
                self._open(), name=LISTEN_OPEN)
            self._opening.add_done_callback(self._opened)

    def _opened(self, attempt: asyncio.Future[bool]) -> None:
        self._opening = None
        if not attempt.cancelled():
            attempt.exception()  # read: an attempt nobody awaited (``watch_held``)

    async def _open(self, *, again: int = 0) -> bool:
        """One attempt; ``again``: the how-manieth after the listener was lost (logged
        at the first only, and not holding ``listen`` back)."""
        assert self._connect is not None
        conn: asyncpg.Connection | None = None
        try:
            async with asyncio.timeout(LISTEN_SECONDS):
                conn = await self._connect()
                self._schema = await conn.fetchval("SELECT current_schema()")
                await conn.add_listener(CHANNEL, self._notified)
                conn.add_termination_listener(self._lost)
        except (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
            if conn is not None:
                conn.terminate()
            if again <= 1:
                _LOG.warning("[storage][listen] cannot listen for turn events: %s",
                             str(exc) or type(exc).__name__)
            if not again:
                self._failed_at = time.monotonic()
            return False
        except BaseException:  # cancelled (``close``): the connection is not kept
            if conn is not None:
                conn.terminate()
            raise
        self._listener = conn
        return True

    def _lost(self, conn: object) -> None:
        """The listening connection ended (a database restart, a cut connection): while
        turns run here, it is opened again (``_relistening``), so that their fences and
        stops keep reaching them at once (lifecycle6; before, a turn starting after
        ``RELISTEN_SECONDS`` opened it again, and the turns running meanwhile learnt
        them at their renewal)."""
        if conn is not self._listener or self._closed:
            return
        self._listener = None
        if self._relisten is None or self._relisten.done():
            self._relisten = asyncio.get_running_loop().create_task(
                self._relistening(), name="postgres relisten")

    async def _relistening(self) -> None:
        delay, again = RELISTEN_FIRST, 0
        while not self._closed and not self.listening and self._signals.holding():
            await asyncio.sleep(delay)
            again += 1
            if self._opening is None:
                self._opening = asyncio.get_running_loop().create_task(
                    self._open(again=again), name=LISTEN_OPEN)
                self._opening.add_done_callback(self._opened)
            if await asyncio.shield(self._opening):
                if again > 1:
                    _LOG.info("[storage][listen] listening for turn events again")
                return
            delay = min(delay * 2, RELISTEN_SECONDS)

    async def close(self) -> None:
        self._closed = True
        if self._relisten is not None:
            self._relisten.cancel()
        opening = self._opening
        if opening is not None:  # an open in flight (its waiter cancelled): close its conn
            await asyncio.wait([opening])  # bounded by ``LISTEN_SECONDS``
        conn, self._listener = self._listener, None
        if conn is not None:
            with contextlib.suppress(Exception):
                await conn.close(timeout=2)

    def _notified(self, _conn: Any, _pid: int, _channel: str, payload: object) -> None:
        schema, _, rest = str(payload).partition(" ")
        kind, _, turn_id = rest.partition(" ")
        if schema != self._schema:
            return
        if kind == "s":
            self._signals.stop_requested(turn_id)
        elif kind == "f":
            self._signals.fenced(turn_id)
        else:
            self._signals.changed(turn_id)

    async def announce_fenced(self, *turn_ids: str) -> None:
        """Tell every node listening (this one included) that these turns' leases were
        taken from them (``_fence_signal.announce_fenced``): one statement."""
        await self._call(ANNOUNCE_FENCED, ([q.to_pg_text(t) for t in turn_ids],),
                         write=False)

    async def append(self, turn_id: str, events: Sequence[LoggedEvent], *,
                     truncate: bool = False) -> None:
        if not events:
            if truncate:
                await self._truncate(turn_id)
            return
        check_batch(events, 0)  # in order within itself; the header checks the rest
        rows = pack_rows(events)
        params = (q.to_pg_text(turn_id), [r[2] for r in rows], events[-1].id,
                  truncate, events[0].id, [r[0] for r in rows], [r[1] for r in rows])
        ((known, written, fenced, _),) = await self._call(APPEND, params, write=True)
        if not known:
            raise TurnNotFound(turn_id)
        if fenced is not None:
            raise TurnLogFenced(turn_id, fenced)
        if not written:
            msg = f"turn {turn_id!r}: event id {events[0].id} does not follow the stored ones"
            raise _OutOfOrder(msg)
        self._signals.changed(turn_id)

    async def _truncate(self, turn_id: str) -> None:
        """A truncation alone, as the memory and SQLite logs take it (``TRUNCATE``)."""
        ((known, fenced, _),) = await self._call(TRUNCATE, (q.to_pg_text(turn_id),),
                                                 write=True)
        if not known:
            raise TurnNotFound(turn_id)
        if fenced is not None:
            raise TurnLogFenced(turn_id, fenced)
        self._signals.changed(turn_id)

    async def append_many(self, batches: Sequence[LogBatch]) -> tuple[StorageError | None, ...]:
        """One ``APPEND_MANY`` statement (one round trip, one transaction) for every
        batch, as ``append`` would write each; a turn with several batches gets one
        statement per batch of it, in order (the statement takes each turn once)."""
        outcomes: list[StorageError | None] = [None] * len(batches)
        for index, batch in enumerate(batches):
            try:
                check_batch(batch.events, 0)  # in order within itself
            except StorageError as exc:
                outcomes[index] = exc
        pending = [(index, batch) for index, batch in enumerate(batches)
                   if (batch.events or batch.truncate) and outcomes[index] is None]
        while pending:
            now: list[tuple[int, LogBatch]] = []
            later: list[tuple[int, LogBatch]] = []
            turns: set[str] = set()
            for index, batch in pending:
                (later if batch.turn_id in turns else now).append((index, batch))
                turns.add(batch.turn_id)
            for index, batch in [(i, b) for i, b in now if not b.events]:  # rare: the cap
                try:
                    await self._truncate(batch.turn_id)
                except (TurnNotFound, TurnLogFenced) as exc:
                    outcomes[index] = exc
            now = [(index, batch) for index, batch in now if batch.events]
            if now:
                for (index, _), outcome in zip(
                        now, await self._append_once([b for _, b in now]), strict=True):
                    outcomes[index] = outcome
            pending = later
        return tuple(outcomes)

    async def _append_once(self, batches: Sequence[LogBatch]) -> list[StorageError | None]:
        """``APPEND_MANY`` for batches of distinct turns, each with events."""
        stored = [(n, row) for n, b in enumerate(batches, 1) for row in pack_rows(b.events)]
        params = ([q.to_pg_text(b.turn_id) for b in batches],
                  [b.events[0].id for b in batches], [b.events[-1].id for b in batches],
                  [b.truncate for b in batches], [row[2] for _, row in stored],
                  [n for n, _ in stored], [row[0] for _, row in stored],
                  [row[1] for _, row in stored])
        rows = await self._call(APPEND_MANY, params, write=True)
        outcomes: list[StorageError | None] = []
        for batch, (_, known, written, fenced, _) in zip(batches, rows, strict=True):
            if not known:
                outcomes.append(TurnNotFound(batch.turn_id))
            elif fenced is not None:
                outcomes.append(TurnLogFenced(batch.turn_id, fenced))
            elif not written:
                msg = (f"turn {batch.turn_id!r}: event id {batch.events[0].id} does not "
                       "follow the stored ones")
                outcomes.append(_OutOfOrder(msg))
            else:
                outcomes.append(None)
                self._signals.changed(batch.turn_id)
        return outcomes

    async def read(self, chat_id: str, turn_id: str, *, after: int = 0,
                   owner: str | None = None, limit: int | None = None) -> TurnLogPage:
        check_limit(limit)
        params = (q.to_pg_text(turn_id), q.to_pg_text(chat_id),
                  None if owner is None else q.to_pg_text(owner), after, limit, self._now())
        rows = await self._call(READ, params, write=False)
        if not rows:
            raise TurnNotFound(turn_id)
        row = rows[0]
        return TurnLogPage(turn=q.turn_from_pg(row), last_id=row[16], truncated=row[17],
                           expired=row[18], stop_requested=row[19],
                           events=unpack_events(row[20] or (), after, limit),
                           attached=row[21], read_at=row[22])

    async def request_stop(self, chat_id: str, turn_id: str, *,
                           owner: str | None = None) -> TurnRecord:
        params = (q.to_pg_text(turn_id), q.to_pg_text(chat_id),
                  None if owner is None else q.to_pg_text(owner), self._now())
        rows = await self._call(REQUEST_STOP, params, write=True)
        if not rows:
            raise TurnNotFound(turn_id)
        record = q.turn_from_pg(rows[0])
        if record.status is TurnStatus.IN_PROGRESS:
            self._signals.stop_requested(turn_id)
        return record

    async def stop_requests(self, turn_ids: Collection[str]) -> frozenset[str]:
        if not turn_ids:
            return frozenset()
        rows = await self._call(STOP_REQUESTS, ([q.to_pg_text(t) for t in turn_ids],),
                                       write=False)
        return frozenset(q.from_pg_text(row[0]) for row in rows)

    async def expire(self, ended_before: datetime | None = None, *,
                     older_than: timedelta | None = None) -> int:
        # An age with no injected clock is taken from the database's, which wrote ended_at.
        cutoff = expire_cutoff(ended_before, older_than, self._now)
        ((count,),) = await self._call(EXPIRE, (cutoff, older_than), write=True)
        return int(count)
