"""``MemoryStore``'s turn-events log: per-turn lists beside the store's rows.

It follows the store's rows: a turn that the store no longer holds (its chat was
deleted) has no log, as the SQL backends cascade the delete.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Collection, Sequence
from datetime import datetime, timedelta
from typing import Any

import attrs

from turnstate.core._errors import StorageError, TurnNotFound
from turnstate.storage._protocol import TurnRecord, TurnStatus
from turnstate.storage._quota import text_bytes
from turnstate.storage._record_checks import check_limit
from turnstate.storage._records import Clock, format_ts, utf8_safe
from turnstate.storage._rows import TURN_COLUMNS, turn_from_row
from turnstate.storage._turn_log import (
    LogBatch,
    LoggedEvent,
    TurnLogPage,
    TurnSignals,
    check_batch,
    check_fence,
    expire_cutoff,
    logged_event,
)


@attrs.define
class _Log:
    events: list[LoggedEvent] = attrs.Factory(list)
    last_id: int = 0
    size: int = 0  # the events' bytes, counted on their owner (``_memory_quota``)
    truncated: bool = False
    expired: bool = False
    stop_requested_at: str | None = None


class MemoryTurnLog:
    """The ``TurnLog`` of a ``MemoryStore``: reads the store's ``turns`` and ``chats`` rows."""

    def __init__(self, *, turns: dict[str, dict[str, Any]], chats: dict[str, dict[str, Any]],
                 clock: Clock, grow: Callable[[str, int], None] | None = None) -> None:
        self._turns, self._chats, self._clock = turns, chats, clock
        self._grow = grow or (lambda owner, delta: None)
        self._logs: dict[str, _Log] = {}
        self._signals = TurnSignals()

    @property
    def signals(self) -> TurnSignals:
        return self._signals

    async def append(self, turn_id: str, events: Sequence[LoggedEvent], *,
                     truncate: bool = False) -> None:
        turn = self._turn_row(turn_id)
        check_fence(turn_id, turn["status"], turn["reason"])
        log = self._logs.setdefault(turn_id, _Log())
        check_batch(events, log.last_id)
        owner = self._chats[turn["chat_id"]]["owner"]
        if truncate:
            log.events.clear()
            log.truncated = True
            self._grow(owner, -log.size)
            log.size = 0
        added = [logged_event(e.id, e.type, utf8_safe(e.data)) for e in events]
        size = sum(text_bytes(e.type) + text_bytes(e.data) for e in added)
        log.size += size
        self._grow(owner, size)
        log.events.extend(added)
        if events:
            log.last_id = events[-1].id
        self._signals.changed(turn_id)

    async def append_many(self, batches: Sequence[LogBatch]) -> tuple[StorageError | None, ...]:
        outcomes: list[StorageError | None] = []
        for batch in batches:
            try:
                await self.append(batch.turn_id, batch.events, truncate=batch.truncate)
            except StorageError as exc:
                outcomes.append(exc)
            else:
                outcomes.append(None)
        return tuple(outcomes)

    async def read(self, chat_id: str, turn_id: str, *, after: int = 0,
                   owner: str | None = None, limit: int | None = None) -> TurnLogPage:
        check_limit(limit)
        record = self._record(chat_id, turn_id, owner)
        log = self._logs.get(turn_id, _Log())
        first = bisect.bisect_right(log.events, after, key=lambda e: e.id)  # ids increase
        end = None if limit is None else first + limit  # a page costs its events (follow12)
        return TurnLogPage(turn=record, events=tuple(log.events[first:end]),
                           last_id=log.last_id, truncated=log.truncated,
                           expired=log.expired,
                           stop_requested=log.stop_requested_at is not None,
                           attached=bool(self._turns[turn_id]["attached"]))

    async def request_stop(self, chat_id: str, turn_id: str, *,
                           owner: str | None = None) -> TurnRecord:
        record = self._record(chat_id, turn_id, owner)
        if record.status is TurnStatus.IN_PROGRESS:
            log = self._logs.setdefault(turn_id, _Log())
            if log.stop_requested_at is None:
                log.stop_requested_at = format_ts(self._clock())
            self._signals.stop_requested(turn_id)
        return record

    async def stop_requests(self, turn_ids: Collection[str]) -> frozenset[str]:
        return frozenset(t for t in turn_ids
                         if (log := self._logs.get(t)) is not None
                         and log.stop_requested_at is not None)

    async def expire(self, ended_before: datetime | None = None, *,
                     older_than: timedelta | None = None) -> int:
        at = expire_cutoff(ended_before, older_than, self._clock)
        cutoff, count = format_ts(at), 0
        for turn_id, log in list(self._logs.items()):
            row = self._turns.get(turn_id)
            if row is None:  # the chat was deleted: the log goes with it
                del self._logs[turn_id]
                continue
            ended = row["ended_at"]
            if not log.expired and ended is not None and ended < cutoff:
                log.events.clear()
                self._grow(self._chats[row["chat_id"]]["owner"], -log.size)
                log.size = 0
                log.expired, count = True, count + 1
        return count

    def forget(self, turn_ids: Collection[str]) -> int:
        """Drop the logs of ``turn_ids`` (their chat is being deleted); their bytes."""
        return sum(log.size for t in turn_ids if (log := self._logs.pop(t, None)) is not None)

    def _turn_row(self, turn_id: str) -> dict[str, Any]:
        row = self._turns.get(turn_id)
        if row is None:
            raise TurnNotFound(turn_id)
        return row

    def _record(self, chat_id: str, turn_id: str, owner: str | None) -> TurnRecord:
        row = self._turns.get(turn_id)
        chat = self._chats.get(chat_id)
        if row is None or chat is None or row["chat_id"] != chat_id \
                or (owner is not None and chat["owner"] != owner):
            raise TurnNotFound(turn_id)
        return turn_from_row(tuple(row[name] for name in TURN_COLUMNS))
