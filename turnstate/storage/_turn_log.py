"""The turn-events log: a running turn's events, kept a short while so a stream can resume.

Every store (``MemoryStore``, ``SqliteStore``, ``PostgresStore``) has a ``turn_log``
implementing ``TurnLog``. It is scratch space, never audit and never continuation state:
``chats.last_provider_state`` stays the only source a turn continues from, and nothing
here is read by a turn.

- Events are numbered per turn from 1, in the order the turn yielded them; ``data`` is
  the event's JSON exactly as a stream sends it. The node running the turn appends them
  in batches (one write holds many events; the engine writes at most 20 per second per
  turn), and the final event (``turn_completed`` / ``turn_aborted``) last.
- A size cap is the writer's: once a turn's events pass it, the writer appends with
  ``truncate=True``, which drops the events kept so far; from then on only the final
  event is written. A reader then learns ``truncated`` and resumes with the final event.
- ``expire`` deletes the events of turns that ended before a time, or (``older_than``)
  more than an age ago on the clock that wrote their ``ended_at`` (retention); the log
  remembers it did (``expired``), so a late reader can be told why nothing is left.
- An append is fenced by the turn's lease, in the same write: once the turn's record
  says its lease was taken from it (``lease_expired``, ``released``) its node's appends
  are refused (``TurnLogFenced``), so a node frozen past its lease cannot add events, nor
  a second ending, after another node reclaimed the turn.
- A stop request (``request_stop``) is recorded on the log's header row. The node that
  runs the turn learns it from ``signals`` (at once on the same process; through
  PostgreSQL ``LISTEN/NOTIFY`` across processes) or by polling ``stop_requests``.

Ownership follows the store's rule: a turn of another owner's chat, or of another chat
than the one named, is ``TurnNotFound`` exactly as an unknown turn.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Collection, Iterable, Sequence
from datetime import datetime, timedelta
from typing import Protocol, TypeVar

import attrs

from turnstate.core._errors import ConfigurationError, StorageError
from turnstate.core._frozen import slot_maker
from turnstate.storage._protocol import TurnRecord
from turnstate.storage._records import LEASE_EXPIRED, utf8_safe
from turnstate.storage._release import RELEASED

FINAL_EVENT_TYPES = frozenset({"turn_completed", "turn_aborted"})


@attrs.frozen
class LoggedEvent:
    """One event of a turn: its id (1, 2, ... within the turn), ``type`` and JSON ``data``."""

    id: int
    type: str
    data: str

    @property
    def final(self) -> bool:
        return self.type in FINAL_EVENT_TYPES


@attrs.frozen
class LogBatch:
    """One turn's share of ``TurnLog.append_many``: what ``append`` would take."""

    turn_id: str
    events: tuple[LoggedEvent, ...]
    truncate: bool = False


logged_event: Callable[[int, str, str], LoggedEvent] = slot_maker(LoggedEvent)
"""``LoggedEvent(id, type, data)`` without attrs' frozen ``__init__`` (every event of a
served turn is one: issue 26's server pass)."""
log_batch: Callable[[str, tuple[LoggedEvent, ...], bool], LogBatch] = slot_maker(LogBatch)
"""``LogBatch(turn_id, events, truncate)``, likewise (one per turn and log write)."""


@attrs.frozen(kw_only=True)
class TurnLogPage:
    """What ``read`` found: the turn's record, its events after the asked id, and the
    log's header (the highest id written, whether the cap or retention dropped events,
    whether a stop was requested)."""

    turn: TurnRecord
    events: tuple[LoggedEvent, ...]
    last_id: int
    truncated: bool
    expired: bool
    stop_requested: bool
    attached: bool = False
    """The turn was begun attached (``TurnStart.attached``): it logs no event, ever."""
    read_at: datetime | None = None
    """The store's time of the read, on the clock that wrote the turn's ``ended_at``,
    where that is not the reader's own (PostgreSQL: the database's); None: the reader's
    clock is the store's (one process or one host)."""


class TurnLog(Protocol):
    """A store's turn-events log (see the module docstring)."""

    @property
    def signals(self) -> TurnSignals: ...

    async def append(self, turn_id: str, events: Sequence[LoggedEvent], *,
                     truncate: bool = False) -> None:
        """Add ``events`` (ids above every stored one) in one write, and wake readers.
        With ``truncate``, drop the turn's stored events first and mark it truncated."""
        ...

    async def append_many(self, batches: Sequence[LogBatch]) -> tuple[StorageError | None, ...]:
        """Append several turns' batches, each as ``append`` would, in one write where the
        backend can (SQLite: one transaction; PostgreSQL: one statement).

        Returns each batch's outcome in order: None when written, else the error its
        ``append`` would have raised (``TurnNotFound``, an id that does not follow), and
        the others are written regardless. Raises only when the store itself fails."""
        ...

    async def read(self, chat_id: str, turn_id: str, *, after: int = 0,
                   owner: str | None = None, limit: int | None = None) -> TurnLogPage:
        """The events with ids above ``after`` (at most ``limit``), in id order.

        A read with a limit costs about its page, not the log after ``after`` (a reader
        pages through a long log, follow12). It may hold fewer where the cap dropped
        events (ids skip there), never none while events follow: whether the log goes on
        past the page is its last event's id against ``last_id``.

        Raises ``TurnNotFound`` for an unknown turn, another chat's, another owner's."""
        ...

    async def request_stop(self, chat_id: str, turn_id: str, *,
                           owner: str | None = None) -> TurnRecord:
        """Record a stop request for a running turn and signal it; returns the turn's
        record (a finished turn is left as it is: the caller reads its status)."""
        ...

    async def stop_requests(self, turn_ids: Collection[str]) -> frozenset[str]:
        """Which of ``turn_ids`` have a stop requested (one query for a node's turns)."""
        ...

    async def expire(self, ended_before: datetime | None = None, *,
                     older_than: timedelta | None = None) -> int:
        """Delete the events of turns that ended before ``ended_before``, or that ended
        more than ``older_than`` ago by the store's own clock, the one that wrote their
        ``ended_at`` (PostgreSQL's unless the store was given a clock: another node's
        clock running ahead would expire fresh logs); give exactly one. Returns how
        many turns' logs were expired. ``ConfigurationError`` (``expire_cutoff``) for
        neither or both, or a negative age."""
        ...


class TurnSignals:
    """In-process wake-ups for one store: new events of a turn, stop requests, fences.

    A reader takes ``next_change(turn_id)`` *before* it reads the log and waits on it
    when the read found nothing new, so an append between the read and the wait is never
    missed. Every append (and, on PostgreSQL, every notification from another process)
    calls ``changed``; every stop request calls ``stop_requested``; every turn whose
    lease was taken from it (a reclaim, an operator's release: ``FENCED_REASONS``) as
    the store or a notification learns it calls ``fenced``, so the node running the
    turn stops it at once, not at its next renewal.
    """

    def __init__(self) -> None:
        self._pending: dict[str, asyncio.Future[None]] = {}
        self._stop_handlers: list[Callable[[str], None]] = []
        self._fence_handlers: list[Callable[[str], None]] = []
        self._holders: list[Callable[[], Collection[str]]] = []

    def next_change(self, turn_id: str) -> asyncio.Future[None]:
        future = self._pending.get(turn_id)
        if future is None:
            future = asyncio.get_running_loop().create_future()
            self._pending[turn_id] = future
        return future

    def changed(self, turn_id: str) -> None:
        future = self._pending.pop(turn_id, None)
        if future is not None and not future.done():
            future.set_result(None)

    def changed_all(self) -> None:
        """Wake every reader waiting for any turn (a change this process cannot place:
        another process wrote to the file)."""
        for turn_id in tuple(self._pending):
            self.changed(turn_id)

    def on_stop(self, handler: Callable[[str], None]) -> Callable[[], None]:
        """Call ``handler(turn_id)`` on every stop request; returns the unsubscribe."""
        self._stop_handlers.append(handler)
        return lambda: self._stop_handlers.remove(handler)

    def stop_requested(self, turn_id: str) -> None:
        for handler in tuple(self._stop_handlers):
            handler(turn_id)
        self.changed(turn_id)

    def on_fenced(self, handler: Callable[[str], None]) -> Callable[[], None]:
        """Call ``handler(turn_id)`` for every turn whose lease was taken from it;
        returns the unsubscribe."""
        self._fence_handlers.append(handler)
        return lambda: self._fence_handlers.remove(handler)

    def fenced(self, turn_id: str) -> None:
        for handler in tuple(self._fence_handlers):
            handler(turn_id)

    def held_by(self, holder: Callable[[], Collection[str]]) -> Callable[[], None]:
        """``holder()`` names turns running here (an engine's, ``run_turn`` ones too),
        for a store that must look for their fences itself (SQLite's watch, lifecycle6);
        returns the unsubscribe."""
        self._holders.append(holder)
        return lambda: self._holders.remove(holder)

    def held(self) -> set[str]:
        """The turns the holders name now."""
        held: set[str] = set()
        for holder in self._holders:
            held.update(holder())
        return held

    def holding(self) -> bool:
        return any(holder() for holder in self._holders)


async def wait_change(future: asyncio.Future[None], seconds: float) -> bool:
    """Wait for ``future`` (shared by every reader of a turn) at most ``seconds``,
    never cancelling it; True when it fired."""
    if not future.done():
        await asyncio.wait((future,), timeout=seconds)
    return future.done()


def turn_log_of(store: object) -> TurnLog:
    """The store's turn-events log; ``ConfigurationError`` for a store without one."""
    log = getattr(store, "turn_log", None)
    if log is None:
        msg = f"{type(store).__name__} keeps no turn-events log (turn_log)"
        raise ConfigurationError(msg)
    return log  # type: ignore[no-any-return]


_Now = TypeVar("_Now", bound=datetime | None)


def expire_cutoff(ended_before: datetime | None, older_than: timedelta | None,
                  now: Callable[[], _Now]) -> datetime | _Now:
    """``expire``'s arguments as the time its turns ended before: ``ended_before``, or
    ``now() - older_than``; None when ``now()`` is (PostgreSQL's clock: the database
    subtracts ``older_than`` itself).

    Raises:
        ConfigurationError: neither or both given, or an age that is not a timedelta of
            zero or more.
    """
    if (ended_before is None) == (older_than is None):
        msg = "expire takes one of ended_before (a time) and older_than (an age)"
        raise ConfigurationError(msg)
    if ended_before is not None:
        return ended_before
    if not isinstance(older_than, timedelta) or older_than < timedelta(0):
        msg = f"older_than must be a timedelta of zero or more, got {older_than!r}"
        raise ConfigurationError(msg)
    current = now()
    if current is None:
        return current
    return current - older_than


FENCED_REASONS = (LEASE_EXPIRED, RELEASED)
"""The reasons a turn is recorded with when its lease was taken from it (a reclaim, an
operator's release): its node may still be running it (frozen past its lease), and the
log takes no more of its events (``check_fence``). Every other ending is the holder's
own, whose last events (the final one) follow it."""


class TurnLogFenced(StorageError):
    """An append for a turn whose lease was taken from it (recorded ``lease_expired`` or
    ``released``): refused in the write itself, so a stale holder writes nothing more and
    a follower never reads a second ending after the record's."""

    def __init__(self, turn_id: str, reason: str) -> None:
        super().__init__(f"turn {turn_id!r} lost its lease ({reason}): its log takes no "
                         "more events")
        self.turn_id, self.reason = turn_id, reason


def check_fence(turn_id: str, status: str, reason: str | None) -> None:
    """``TurnLogFenced`` when the turn's record says its lease was taken from it."""
    if status == "aborted" and reason in FENCED_REASONS:
        raise TurnLogFenced(turn_id, reason)


def check_batch(events: Sequence[LoggedEvent], last_id: int) -> None:
    """Ids strictly increasing, all above ``last_id``: the log never reorders or rewrites."""
    previous = last_id
    for event in events:
        if event.id <= previous:
            msg = f"turn event id {event.id} does not follow {previous}"
            raise StorageError(msg)
        previous = event.id


_PACK = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), check_circular=False)


def pack_events(events: Sequence[LoggedEvent]) -> str:
    """A batch's events as the one JSON value the SQL logs store per write:
    ``[[id, type, data], ...]``, each ``data`` made storable as UTF-8 (``utf8_safe``)."""
    return _PACK.encode([[e.id, e.type, utf8_safe(e.data)] for e in events])


STORED_EVENTS = 256
"""The most events the SQL logs store in one row: a write of more (a turn whose events
came faster than its node's writer ticks, a write retried after an outage) is stored in
rows of this many, in the same write, so a read of a page parses about that page, not
the write's every event at each page (follow12)."""


def pack_rows(events: Sequence[LoggedEvent]) -> list[tuple[int, int, str]]:
    """``events`` as the rows the SQL logs store: ``(first id, last id, pack_events)``
    for each run of at most ``STORED_EVENTS`` of them, in order."""
    return [(run[0].id, run[-1].id, pack_events(run))
            for start in range(0, len(events), STORED_EVENTS)
            if (run := events[start:start + STORED_EVENTS])]


def unpack_events(packed: Iterable[str], after: int, limit: int | None,
                  ) -> tuple[LoggedEvent, ...]:
    """The events of stored batches (``pack_events``, in id order) with ids above
    ``after``, at most ``limit`` of them."""
    found: list[LoggedEvent] = []
    for text in packed:
        found.extend(logged_event(i, t, d) for i, t, d in json.loads(text) if i > after)
        if limit is not None and len(found) >= limit:
            return tuple(found[:limit])
    return tuple(found)
