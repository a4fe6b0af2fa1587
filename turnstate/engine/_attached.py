"""Following a turn its consumer iterates here with ``run_turn`` (an attached turn).

Such a turn numbers no events and keeps none (a detached turn's runner does both:
``_live``), so a follower joining it mid-turn gets what comes after its join. The
turn's first follower gives its ``LeaseKeeper`` a ``Followers``; from then on the drive
loop (``_lifecycle.TurnLife.run``) hands each event it yields to ``publish``, which
numbers it (1, 2, ... from that first join: ids of this process's followers, never
comparable with a detached turn's or its log's), encodes it once and keeps it in a
bounded window. A turn nobody follows pays one attribute test per event.

Each follower keeps its own position in the window and waits on its own future, so a
slow follower never slows the consumer: ``publish`` appends and wakes, it never waits.
A follower the window moved past (it took nothing for ``MAX_KEPT_EVENTS`` events) lost
events: it gets those still kept and the final event, the gap in the ids saying so, as
a detached turn's cap drops events but never the end. A follower's first batch comes
with the notice ``not_logged`` when events before it are not available (always, for a
follower from the start: the turn had yielded events before anyone followed it).

The turn's end reaches the followers as its final event; a turn that ends without one
(its consumer left: a cancel, ``aclose``) closes the window when its keeper stops, and
its followers get the end rebuilt from the store (``REBUILT_FINAL_ID``, as a dead
node's turn).
"""

from __future__ import annotations

import asyncio
import itertools
from collections import deque
from collections.abc import AsyncIterator, Callable
from typing import Protocol

from turnstate.core._errors import InvalidInput
from turnstate.core._events import TurnEvent
from turnstate.engine._follow import (  # NOT_LOGGED: its old import path
    NOT_LOGGED,
    REBUILT_FINAL_ID,
    Following,
    synthesized_final,
)
from turnstate.engine._lease import LeaseKeeper
from turnstate.engine._live import AFTER, wait_among, wake_all
from turnstate.storage._protocol import Store
from turnstate.storage._turn_log import (
    FINAL_EVENT_TYPES,
    LoggedEvent,
    TurnLog,
    logged_event,
)

MAX_KEPT_EVENTS = 4096
"""The window: a follower this far behind the turn loses the events it had not taken."""


class Followers:
    """The followers of one attached turn on this process (see the module docstring)."""

    def __init__(self, store: Store, chat_id: str, turn_id: str,
                 encode: Callable[[TurnEvent], str]) -> None:
        self.store, self.chat_id, self.turn_id, self.encode = store, chat_id, turn_id, encode
        self.kept: deque[LoggedEvent] = deque(maxlen=MAX_KEPT_EVENTS)
        self.last_id = 0
        self.final: LoggedEvent | None = None
        self.closed = False  # the turn ended (with or without its final event)
        self._waiters: list[asyncio.Future[None]] = []

    def publish(self, event: TurnEvent) -> bool:
        """Number, encode and keep ``event``; wake the waiting followers (whether any
        was: a value, for the drive loop's ``followers and followers.publish(...)``)."""
        self.last_id += 1
        kind = event.type
        entry = logged_event(self.last_id, kind, self.encode(event))
        self.kept.append(entry)
        if kind in FINAL_EVENT_TYPES:
            self.final = entry
        return self._wake()

    def close(self) -> None:
        """The turn has ended: its followers without a final event rebuild it."""
        self.closed = True
        self._wake()

    def _wake(self) -> bool:
        if not self._waiters:
            return False
        waiters, self._waiters = self._waiters, []
        wake_all(waiters)
        return True

    def following(self, after: int) -> Following:
        """A follower from ``after`` (0, or an id this process gave): refused beyond the
        last id, as a detached turn's resume is."""
        if after > self.last_id:
            msg = f"event {after} is beyond this turn's last event ({self.last_id})"
            raise InvalidInput(AFTER, msg)
        first = self.kept[0].id if self.kept else self.last_id + 1
        notice = NOT_LOGGED if after == 0 or after + 1 < first else None
        return Following(notice=notice, batches=self._batches(max(after, first - 1)))

    def _after(self, after: int) -> tuple[LoggedEvent, ...]:
        kept = self.kept
        if not kept:
            return ()
        first = kept[0].id
        if after + 1 < first and self.final is None:  # the window passed it: wait for
            return ()  # the end, which is kept (the final event is the last published)
        start = max(after + 1 - first, 0)
        return tuple(itertools.islice(kept, start, None))

    async def _batches(self, after: int) -> AsyncIterator[tuple[LoggedEvent, ...]]:
        while True:
            batch = self._after(after)
            if batch:
                yield batch
                if batch[-1].final:
                    return
                after = batch[-1].id
                continue
            if self.closed:  # ended without a final event (its consumer left)
                if self.final is None:
                    event = await synthesized_final(self.store, self.chat_id, self.turn_id)
                    yield (LoggedEvent(REBUILT_FINAL_ID, event.type, self.encode(event)),)
                return
            await wait_among(self._waiters)


class _Engine(Protocol):
    store: Store
    attached: dict[str, LeaseKeeper]


async def follow_attached(engine: _Engine, log: TurnLog, keeper: LeaseKeeper, *, after: int,
                          owner: str | None, encode: Callable[[TurnEvent], str],
                          ) -> Following | None:
    """A follower of the attached turn ``keeper`` holds (its first one gives it its
    ``Followers``), once the log has checked the chat and the owner (``TurnNotFound``);
    None if the turn ended meanwhile (the log's reader then takes it)."""
    lease = keeper.lease
    await log.read(lease.chat_id, lease.turn_id, after=0, owner=owner, limit=1)
    if engine.attached.get(lease.turn_id) is not keeper:
        return None
    followers = keeper.followers
    if not isinstance(followers, Followers):  # None: its first follower
        followers = Followers(engine.store, lease.chat_id, lease.turn_id, encode)
        keeper.followers = followers
    return followers.following(after)
