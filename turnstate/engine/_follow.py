"""Following a turn that runs on another node (or has ended): through the store's log.

The reader reads the log after its position and sends what it found; then it takes what
is new from the turn's hub (``_follow_hub``: one reader of the log for all of the turn's
followers on this node), or reads the log on its own while its position is older than
the hub's buffer; when nothing is new it waits for the hub's next read (the hub reads at
a change notification, an append on this process, or ``poll_seconds``). Once the turn's
record says it ended, the final event is the last one of the log; if the log never gets
one (the node running the turn crashed, or the log expired), the final event is rebuilt
from the stored record: the turn's path, reason and answer text (its provider requests
and bytes are known only to the engine that ran it, and read 0). A crashed node's log
may lack events its own streams sent (it writes them in batches), so the rebuilt final
event has ``REBUILT_FINAL_ID``, above any id the turn gave; a stream resuming from that
id has had the end and gets nothing more.

The log is read a page at a time (``PAGE_EVENTS``), so a follower whose client reads
nothing holds about a page; the turn's end is judged only on a page that reaches the
log's end (``reaches_end``): one short of it says nothing of the end, and the next page
follows at once. A log expired while a follower pages through it ends as an expired log does: its
final event rebuilt with the log's last id (the events between are gone with it).

A resume past the log's last id is refused only when the log is whole (the turn ended
and its log holds the final event, or expired): while the turn runs, or has ended
without its final event logged, the id may be one its node sent before its log write
(or before it died), and the stream gets the events after it as they are logged, else
the rebuilt final event.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from datetime import datetime

import attrs

from turnstate.core._errors import InvalidInput
from turnstate.core._events import TurnAborted, TurnEvent
from turnstate.engine._follow_hub import PAGE_EVENTS, _Hub, first_page, join, reaches_end
from turnstate.engine._live import AFTER
from turnstate.engine._retried import completed_from_store, stored_answer, stored_stats
from turnstate.storage._protocol import Store, TurnRecord, TurnStatus
from turnstate.storage._records import LEASE_EXPIRED
from turnstate.storage._turn_log import LoggedEvent, TurnLog, TurnLogPage, wait_change

FINAL_GRACE_SECONDS = 12.0
"""How long a reader waits for an ended turn's final event, from the end and again from
each write its node still makes to the log, before rebuilding it: the node running the
turn writes its last events after the commit, at its writer's next tick (later on a
node busy with its own streams), and retries a failed write for 10 s
(``_detached.LOG_RETRY_SECONDS``). Not at all for a turn the store ended
``lease_expired`` (its node is gone: a sweep or the next turn on its chat reclaimed it)
nor for one begun attached (``TurnLogPage.attached``: iterated with ``run_turn``, it
logs nothing): nobody writes their final event."""

ENDED_LONG_AGO_SECONDS = 60.0
"""A turn that ended this long ago (by the reader's clock against the recorded end)
gets no grace: its node logs its last events within ``LOG_RETRY_SECONDS`` of its end, or
never (a turn iterated with ``run_turn`` logs none). Five times the grace, so a node's
clock ahead of the one that wrote ``ended_at`` by up to 48 s still waits it out."""

NOT_LOGGED = "not_logged"
"""The notice of a follower that cannot get the turn's events before what follows: a
turn iterated with ``run_turn`` keeps none (none at all once it ended, none from before
its first follower while it runs: ``_attached``); an ended turn whose log holds none
(one iterated with ``run_turn``, or a detached turn whose node wrote none: it died, or
its writes failed) gets only its end, rebuilt from the store; so does a running turn the
store marked attached (``TurnLogPage.attached``), followed from another process."""

REBUILT_FINAL_ID = 999_999_999
"""The id of a final event rebuilt from the store: the largest a resume takes (nine
digits), above any a turn numbers (its events are counted, not kept, past the 8 MiB
cap), so it follows every event any stream of the turn had, and is the same for all."""


@attrs.frozen
class Following:
    """A resumed stream: ``notice`` says why earlier events are missing (``log_truncated``,
    ``log_expired`` or ``not_logged``, else None), ``batches`` runs to the final event,
    each batch what was there at once (never empty); ``events`` is the same one by one."""

    notice: str | None
    batches: AsyncIterator[tuple[LoggedEvent, ...]]

    @property
    def events(self) -> AsyncIterator[LoggedEvent]:
        return _one_by_one(self.batches)


async def _one_by_one(batches: AsyncIterator[tuple[LoggedEvent, ...]],
                      ) -> AsyncIterator[LoggedEvent]:
    async for batch in batches:
        for event in batch:
            yield event


async def follow_log(store: Store, log: TurnLog, chat_id: str, turn_id: str, *, after: int,
                     owner: str | None, encode: Callable[[TurnEvent], str],
                     poll_seconds: float, now: Callable[[], datetime] | None = None,
                     ) -> Following:
    """Check the resume point and start following (see the module docstring)."""
    page = await first_page(log, chat_id, turn_id, owner, after=after)  # shared at once
    if after > page.last_id and page.turn.status is not TurnStatus.IN_PROGRESS:
        if after >= REBUILT_FINAL_ID:  # the id a reader gave the final event it rebuilt
            return Following(notice=None, batches=_nothing_more())
        if await _whole(log, page, chat_id, owner):
            msg = f"event {after} is beyond this turn's last event ({page.last_id})"
            raise InvalidInput(AFTER, msg)
    notice = None
    if page.expired and after < page.last_id:
        notice = "log_expired"
    elif page.truncated and (not page.events or page.events[0].id > after + 1):
        notice = "log_truncated"
    elif page.last_id == 0 and not page.expired \
            and (page.attached or page.turn.status is not TurnStatus.IN_PROGRESS):
        notice = NOT_LOGGED  # ended, or attached, and not one event logged: its end follows
    reader = _Reader(store, log, chat_id, turn_id, owner, encode, poll_seconds, now)
    return Following(notice=notice, batches=reader.batches(page, after))


async def _whole(log: TurnLog, page: TurnLogPage, chat_id: str, owner: str | None) -> bool:
    """Whether the ended turn's log held its final event as its last: the log says so,
    or it expired and the turn's node ended it (one that died, ``lease_expired``, wrote
    none; the expired log cannot say)."""
    if page.expired:
        return page.turn.reason != LEASE_EXPIRED
    return await _ends_with_final(log, page, chat_id, owner)


async def _ends_with_final(log: TurnLog, page: TurnLogPage, chat_id: str,
                           owner: str | None) -> bool:
    """Whether the turn's log ends with its final event (``page`` read after any id)."""
    if page.last_id < 1:
        return False
    last = await log.read(chat_id, page.turn.id, after=page.last_id - 1, owner=owner,
                          limit=1)
    return bool(last.events) and last.events[0].id == page.last_id and last.events[0].final


async def _nothing_more() -> AsyncIterator[tuple[LoggedEvent, ...]]:
    return
    yield  # an async generator that ends at once


@attrs.define
class _Reader:
    store: Store
    log: TurnLog
    chat_id: str
    turn_id: str
    owner: str | None
    encode: Callable[[TurnEvent], str]
    poll_seconds: float
    now: Callable[[], datetime] | None = None
    """The wall clock the turn's ``ended_at`` is read against: a turn that ended long
    ago (``ENDED_LONG_AGO_SECONDS``) gets no grace."""
    hub: _Hub | None = None
    seed: tuple[int, TurnLogPage] | None = None
    """The reader's first page and the id it was read after: what a hub it starts holds
    first, so that followers joining later from as far back take it from there."""
    """The turn's shared reader on this node (``_follow_hub``), once the reader has
    caught up with what it first read."""

    async def batches(self, page: TurnLogPage, after: int,
                      ) -> AsyncIterator[tuple[LoggedEvent, ...]]:
        """The log's events after ``after`` to the turn's end (see ``_batches``). A
        reader's last change mark stays in the log's signals until the turn's next change,
        which an ended turn never has: it is let go then (waking the turn's other readers
        here, which are ending too), else each followed turn kept one for good."""
        ended, self.seed = False, (after, page)
        try:
            async with contextlib.aclosing(self._batches(page, after)) as batches:
                async for batch in batches:
                    ended = ended or batch[-1].final
                    yield batch
            ended = True
        finally:
            if ended:
                self.log.signals.changed(self.turn_id)

    async def _batches(self, page: TurnLogPage, after: int,
                       ) -> AsyncGenerator[tuple[LoggedEvent, ...], None]:
        try:
            loop = asyncio.get_running_loop()
            quiet_since: float | None = None  # once it ended: since its end or last write
            while True:
                if page.events:
                    final = next((i for i, e in enumerate(page.events) if e.final), None)
                    if final is not None:
                        yield page.events[:final + 1]
                        return
                    yield page.events
                    after = page.events[-1].id
                if page.turn.status is not TurnStatus.IN_PROGRESS and reaches_end(page):
                    if quiet_since is None and await self._saw_final(after):
                        return
                    if quiet_since is None or page.events:  # its node is still writing
                        quiet_since = loop.time()
                    if page.expired or page.turn.reason == LEASE_EXPIRED or page.attached \
                            or loop.time() - quiet_since >= FINAL_GRACE_SECONDS \
                            or self._ended_long_ago(page):  # nobody writes its end now
                        rebuilt = await self._rebuilt(page, after)
                        if rebuilt is not None:
                            yield (rebuilt,)
                        return
                page, mark = await self._next_page(after)
                if page.events:
                    continue
                if quiet_since is not None:  # waiting for its final event, within the grace
                    left = FINAL_GRACE_SECONDS - (loop.time() - quiet_since)
                    await wait_change(mark, min(self.poll_seconds, max(left, 0.0)))
                elif page.turn.status is TurnStatus.IN_PROGRESS:
                    await wait_change(mark, self.poll_seconds)
                # else: it has just ended, seen at the loop's top at once (not a poll later)
        finally:
            self._leave()

    def _ended_long_ago(self, page: TurnLogPage) -> bool:
        """Whether the turn's recorded end is ``ENDED_LONG_AGO_SECONDS`` old, and its
        node has not just written (the page holds no events): by the store's time of the
        read when it gives one (PostgreSQL's: a node whose clock is minutes ahead of the
        database must not rebuild the end of a turn another node has just ended), else by
        the reader's clock."""
        ended_at = page.turn.ended_at
        if ended_at is None or page.events:
            return False
        now = page.read_at
        if now is None:
            if self.now is None:
                return False
            now = self.now()
        return (now - ended_at).total_seconds() >= ENDED_LONG_AGO_SECONDS

    def _leave(self) -> None:
        if self.hub is not None:
            self.hub.leave()
            self.hub = None

    async def _next_page(self, after: int) -> tuple[TurnLogPage, asyncio.Future[None]]:
        """The log after ``after`` and what to wait on when it holds nothing new: the
        buffer of the turn's hub (joined at the first call) and its next read, else (the
        hub has not read yet, or ``after`` is older than its buffer) a read of its own
        and the turn's change mark."""
        hub = self.hub
        if hub is None:
            hub = self.hub = join(self.log, self.chat_id, self.turn_id, self.owner,
                                  after=after, poll_seconds=self.poll_seconds,
                                  seed=self.seed)
            self.seed = None
        shared, read_done = hub.page_after(after)
        if shared is None and hub.reading(after):  # its read of what follows is under way
            await wait_change(read_done, self.poll_seconds)
            shared, read_done = hub.page_after(after)
        if shared is not None:
            return shared, read_done
        mark = self.log.signals.next_change(self.turn_id)
        page = await self.log.read(self.chat_id, self.turn_id, after=after, owner=self.owner,
                                   limit=PAGE_EVENTS)
        return page, mark

    async def _saw_final(self, after: int) -> bool:
        """Whether the event ``after`` (the last one the reader has) is the final one."""
        if after < 1:
            return False
        page = await self.log.read(self.chat_id, self.turn_id, after=after - 1,
                                   owner=self.owner, limit=1)
        return bool(page.events) and page.events[0].id == after and page.events[0].final

    async def _rebuilt(self, page: TurnLogPage, after: int) -> LoggedEvent | None:
        """The final event rebuilt from the store, unless the reader had it: an expired
        log held it as its last (but a dead node's, ``lease_expired``); a log that holds
        it (the reader resumed past it) needs none; a dead node's log has none, the
        rebuilt one has ``REBUILT_FINAL_ID``, expired or not."""
        if page.expired and page.turn.reason != LEASE_EXPIRED:
            final_id = page.last_id
        elif not page.expired and await _ends_with_final(self.log, page, self.chat_id,
                                                         self.owner):
            return None
        else:
            final_id = REBUILT_FINAL_ID
        if final_id <= after:
            return None
        event = await synthesized_final(self.store, self.chat_id, self.turn_id,
                                        record=page.turn)
        return LoggedEvent(final_id, event.type, self.encode(event))


async def synthesized_final(store: Store, chat_id: str, turn_id: str, *,
                            record: TurnRecord | None = None) -> TurnEvent:
    """The final event of an ended turn, rebuilt from what the store holds."""
    if record is None:
        record = await store.load_turn(turn_id)
    if record.status is TurnStatus.COMPLETED:
        return await completed_from_store(store, chat_id, record)
    answer = await stored_answer(store, chat_id, record)
    return TurnAborted(turn_id=turn_id, chat_id=chat_id, reason=record.reason or "cancelled",
                       detail=record.detail, strategy=record.strategy, degradation=None,
                       path=record.path, stats=stored_stats(answer))
