"""``LiveTurn``: one detached turn running on this process, and its in-memory fan-out.

The runner (``_detached``) numbers every event the turn yields (1, 2, ...) and publishes
it here with its JSON; any number of followers on this process read the same list from
their own position, in batches (what was published since they last looked), each
waiting on its own future for more (all woken by the next publish). The list is the
same window the log keeps: past the size cap, the events so far are dropped and only
the final one is kept, so a turn's memory stays bounded however long it runs.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

from turnstate.core._errors import InvalidInput
from turnstate.core._events import StateChanged, TurnEvent
from turnstate.states._table import INITIAL, STOPPABLE_STATES, State
from turnstate.storage._turn_log import FINAL_EVENT_TYPES, LoggedEvent, logged_event

LOG_TRUNCATED = "log_truncated"
LOG_EXPIRED = "log_expired"

AFTER = "after"  # the field an out-of-range resume id is refused for

_STATES: dict[str, State] = {state.value: state for state in State}


class LiveTurn:
    """A running turn's events on this process (see the module docstring)."""

    def __init__(self, *, chat_id: str, turn_id: str, owner: str | None, provider: str,
                 cap_bytes: int, model: str = "") -> None:
        self.chat_id, self.turn_id, self.owner, self.provider = chat_id, turn_id, owner, provider
        self.model = model  # as its ``TurnInput`` named it (the record a stop in an outage
        # returns, ``_stop_outage.local_record``)
        self.cap_bytes = cap_bytes
        self.entries: list[LoggedEvent] = []  # ids dropped_through + 1, ... in order
        self.dropped_through = 0  # ids up to this one were dropped by the cap
        self.last_id = 0
        self.size = 0
        self.state = INITIAL
        self.final: TurnEvent | None = None
        self.started_at = time.perf_counter()
        self.stop_requested = False
        # the runner: it ends with the turn, not with its log write (``logged``; or
        # ``DetachedTurns.settled`` for both)
        self.task: asyncio.Task[None] | None = None
        self.started = False  # its runner's first step has run (``DetachedTurns._end``)
        self.logged = asyncio.Event()  # the log holds the final event (or gave up)
        self.logged_through = 0  # the writer has logged (or the cap dropped) ids up to this
        self.truncation_logged = False  # the log has dropped what the cap dropped
        self.ran_out = False  # its runner has ended (it stays here until also logged)
        self.log_failed_at: float | None = None  # monotonic time of the first failed write
        self._waiters: list[asyncio.Future[None]] = []  # one per waiting follower

    @property
    def done(self) -> bool:
        return self.final is not None

    @property
    def truncated(self) -> bool:
        return self.dropped_through > 0

    @property
    def stoppable(self) -> bool:
        return self.state in STOPPABLE_STATES and not self.done

    def publish(self, event: TurnEvent, data: str) -> bool:
        """Number ``event`` and keep it (or, past the cap, only count it); whether a
        follower was waiting for it."""
        self.last_id += 1
        kind = event.type
        entry = logged_event(self.last_id, kind, data)
        final = kind in FINAL_EVENT_TYPES
        if final:
            self.final = event
        elif isinstance(event, StateChanged):
            self.state = _STATES[event.dest]  # not State(...): an enum call per change
        self.size += len(data)
        if self.size > self.cap_bytes and not final:
            self.entries.clear()
            self.dropped_through = self.last_id
        else:
            self.entries.append(entry)
        return self.wake()

    def wake(self) -> bool:
        """Wake the waiting followers; whether there were any."""
        if not self._waiters:
            return False
        waiters, self._waiters = self._waiters, []
        wake_all(waiters)
        return True

    def after(self, after: int) -> tuple[LoggedEvent, ...]:
        """The kept events with ids above ``after`` (the kept ids run without a gap, so
        a slice finds them)."""
        if not self.entries:
            return ()
        first = self.entries[0].id
        if after < first:
            return tuple(self.entries)
        return tuple(self.entries[after - first + 1:])

    def check_after(self, after: int) -> None:
        if after > self.last_id:
            msg = f"event {after} is beyond this turn's last event ({self.last_id})"
            raise InvalidInput(AFTER, msg)

    def notice(self, after: int) -> str | None:
        """``log_truncated`` when events after ``after`` were dropped by the cap."""
        return LOG_TRUNCATED if after < self.dropped_through else None

    async def follow(self, after: int) -> AsyncIterator[LoggedEvent]:
        """The events after ``after``, then the live ones, up to the final event."""
        async for batch in self.follow_batches(after):
            for entry in batch:
                yield entry

    async def follow_batches(self, after: int) -> AsyncIterator[tuple[LoggedEvent, ...]]:
        """``follow`` in batches: each is every event published since the last one (never
        empty), the last batch ends with the final event."""
        while True:
            batch = self.after(after)
            if batch:
                yield batch
                if batch[-1].final:  # always the last event published
                    return
                after = batch[-1].id
            elif self.done:
                return  # the final event was already seen
            else:
                await wait_among(self._waiters)


async def wait_among(waiters: list[asyncio.Future[None]]) -> None:
    """Wait, among ``waiters``, for ``wake_all`` (a follower's wait for more events); a
    follower that leaves meanwhile takes its waiter out."""
    waiter = asyncio.get_running_loop().create_future()
    waiters.append(waiter)
    try:
        await waiter
    finally:
        if waiter.cancelled() and waiter in waiters:  # a follower left
            waiters.remove(waiter)


def wake_all(waiters: list[asyncio.Future[None]]) -> None:
    """Resolve every waiter still waiting (a follower's wait for more events)."""
    for waiter in waiters:
        if not waiter.done():
            waiter.set_result(None)
