"""The upkeep of detached turns (``_detached``): waiting for them, the log's retention and
a dead node's turns swept, and the shutdown that ends every turn running here.

``DetachedUpkeep`` is ``DetachedTurns``' maintenance half (a mixin: the turns' ``live``
map, ``log`` and tasks are its state), kept apart so running, logging and following a
turn read on their own.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Protocol

from turnstate.core._errors import StorageError
from turnstate.core._events import TurnEvent
from turnstate.engine._lease import LeaseKeeper
from turnstate.engine._live import LiveTurn
from turnstate.engine._turn_input import TurnInput
from turnstate.states._table import Trigger
from turnstate.storage._protocol import Store
from turnstate.storage._turn_log import TurnLog

logger = logging.getLogger("turnstate")


class Engine(Protocol):
    """What detached turns need of ``TurnEngine``."""

    store: Store
    clock: Callable[[], datetime]
    endings: dict[str, Trigger]
    attached: dict[str, LeaseKeeper]  # turns consumers iterate here (run_turn), by id
    lease_seconds: float

    def run_turn(self, chat_id: str, turn: TurnInput) -> AsyncIterator[TurnEvent]: ...

    def run_detached_turn(self, chat_id: str, turn: TurnInput,
                          ) -> AsyncIterator[TurnEvent]: ...


class DetachedUpkeep:
    """The maintenance half of ``DetachedTurns`` (see the module docstring)."""

    engine: Engine
    live: dict[str, LiveTurn]
    retention_seconds: float
    closing: bool
    _starting: set[asyncio.Future[None]]
    _poller: asyncio.Task[None] | None
    _writer: asyncio.Task[None] | None
    _late: int
    _stop_writes: set[asyncio.Task[None]]  # stops asked in an outage, still being written
    _end: Callable[[LiveTurn, Trigger], None]

    if TYPE_CHECKING:  # for the checker only: ``DetachedTurns.log``, a property
        @property
        def log(self) -> TurnLog: ...

    async def settled(self) -> None:
        """Wait until every turn running here has ended and its log is written."""
        while self.live:
            await _ended_and_logged(list(self.live.values()))

    async def expire(self) -> int:
        """Delete the logs of turns that ended more than ``retention_seconds`` ago, by the
        store's clock (the one that wrote their end): this node's may run ahead."""
        return await self.log.expire(older_than=timedelta(seconds=self.retention_seconds))

    async def reclaim(self) -> int:
        """End every turn whose lease ran out (its node died or lost the store):
        ``aborted`` with ``lease_expired``, its chat free. Returns how many.

        Without it a dead node's turn stayed ``in_progress`` until the next turn on its
        chat took the lease over, and every stream following it waited until then: the
        log never gets the final event a dead node would have written, and a follower
        rebuilds it only once the turn's record says it ended.
        """
        reclaimed = await self.engine.store.reclaim_expired()
        if reclaimed:
            logger.info("[lease] reclaimed %d turn(s) whose lease ran out", reclaimed)
            self.log.signals.changed_all()  # their readers here end now, not at their poll
        return reclaimed

    def sweep_seconds(self) -> float:
        """The maintenance period: a tenth of the log's retention or half a lease,
        whichever is shorter (at least a second), so a dead node's turn ends at most
        one and a half leases after its last renewal."""
        return max(1.0, min(self.retention_seconds / 10, self.engine.lease_seconds / 2))

    async def maintain(self, every: float | None = None) -> None:
        """Every ``every`` seconds (``sweep_seconds`` by default): ``reclaim``, then
        ``expire``, and keep the store listening; runs until cancelled. A failed sweep
        is logged and tried again the next period."""
        period = every if every is not None else self.sweep_seconds()
        while True:
            try:
                await self.reclaim()
            except StorageError as exc:
                logger.warning("[lease] reclaim sweep failed: %s", exc)
            try:
                await self.expire()
                await _listen(self.log)
            except StorageError as exc:
                logger.warning("[turn-log] retention sweep failed: %s", exc)
            await asyncio.sleep(period)  # the sweep's period

    async def close(self) -> int:
        """End every turn running here ``cancelled`` (each with its final event), and those
        whose start is in flight as soon as they begin, and wait until their logs are
        written; returns how many were running or starting."""
        self.closing = True
        running = [live for live in self.live.values() if not live.done]
        for live in running:
            self._end(live, Trigger.CANCELLED)
        while self._starting:  # a begin in flight: its turn ends as soon as it has begun
            await asyncio.wait(tuple(self._starting))
        await _ended_and_logged(list(self.live.values()))
        if self._poller is not None:
            self._poller.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._poller
        for write in tuple(self._stop_writes):  # their turns have ended here: moot now
            write.cancel()
        return len(running) + self._late

    def abandon(self) -> None:
        """Stop waiting for the store (a shutdown past its grace, ``close`` given up):
        cancel every runner still running, the log writer and the stop poller. What they
        had not written stays unwritten: each turn's lease frees its chat when it runs
        out (a sweep then ends it ``lease_expired``), and a stream resuming it rebuilds
        its end from the stored turn."""
        tasks = [live.task for live in self.live.values()]
        for task in (*tasks, *self._stop_writes, self._writer, self._poller):
            if task is not None:
                task.cancel()


async def _ended_and_logged(lives: list[LiveTurn]) -> None:
    """Wait until each of ``lives`` has ended (its runner too) and its log is written."""
    await asyncio.gather(*(live.task for live in lives if live.task is not None),
                         return_exceptions=True)
    for live in lives:
        await live.logged.wait()


async def _listen(log: TurnLog) -> None:
    listen = getattr(log, "listen", None)
    if listen is not None:
        await listen()
