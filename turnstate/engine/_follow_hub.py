"""One log reader per followed turn on a node, shared by the turn's followers here.

Each follower of a turn running on another node used to read the turn's log on its own:
once a poll while idle, and once at each change notification, so N followers of one turn
cost N reads where one would do. A ``_Hub`` reads the log for all of them: it takes the
turn's change mark, reads after the last id it has, keeps what it read in a bounded
buffer and wakes its followers; when nothing is new it waits for the mark at most a
poll. Each follower keeps its own position and takes from the buffer the events after
it; one whose position is older than the buffer (it resumed from further back, or it
was slow and the buffer moved on) reads the log on its own until it has caught up, so a
slow follower neither holds the others back nor makes the buffer grow. The hub ends
when its last follower leaves.

A follower's first read (``first_page``: the resume check and its first events) is
shared too: served from the hub's buffer when it holds the follower's id (the hub starts
with its first follower's first page), else from a read another join has under way,
else read once for every join that arrives while it runs.

Every read takes at most ``PAGE_EVENTS`` events, and a page the hub serves holds at most
as many, so a follower whose client reads nothing holds about one page, not the rest of
the log (follow12). A page need not reach the log's end (``reaches_end``): the hub reads
its next page once a follower has taken the last one it read, and a follower takes the
next at once, judging the turn's end only on a page that reaches it.
"""

from __future__ import annotations

import asyncio
import bisect

import attrs

from turnstate.storage._protocol import TurnStatus
from turnstate.storage._turn_log import LoggedEvent, TurnLog, TurnLogPage, wait_change

BUFFER_EVENTS = 4096
"""The most events a hub keeps for its followers (the oldest go first)."""

BUFFER_CHARS = 8 * 1024 * 1024
"""The most characters of event data a hub keeps (the oldest events go first)."""

PAGE_EVENTS = 1024
"""The most events one read of the log takes, and one page a follower gets holds: about
200 KiB of ``LoggedEvent`` for text deltas (a whole 49,000-delta log read at once was
10 MiB, held by each follower whose client read nothing: follow12)."""


def reaches_end(page: TurnLogPage) -> bool:
    """Whether ``page`` holds the log's events up to its last (as the read found it):
    a store's read that found nothing after its id, or whose last event is the log's.
    Short of it, more events follow: the turn's end is judged on no such page."""
    return not page.events or page.events[-1].id >= page.last_id


_Key = tuple[asyncio.AbstractEventLoop, int, str, str, str | None]
_HUBS: dict[_Key, _Hub] = {}


@attrs.define(eq=False)
class _Hub:
    log: TurnLog
    chat_id: str
    turn_id: str
    owner: str | None
    poll_seconds: float
    key: _Key
    start: int
    """The buffer holds every logged event after this id up to ``tail``."""
    tail: int
    events: list[LoggedEvent] = attrs.field(factory=list)
    chars: int = 0
    header: TurnLogPage | None = None  # the last read: the turn's record, the log's header
    more: bool = False
    """The last read did not reach the log's end (``reaches_end``): the next page is
    read once a follower wants it (``wanted``), not for a buffer nobody takes from."""
    wanted: asyncio.Event = attrs.field(factory=asyncio.Event)
    error: Exception | None = None
    followers: int = 0
    task: asyncio.Task[None] | None = None
    read_done: asyncio.Future[None] = attrs.field(
        factory=lambda: asyncio.get_running_loop().create_future())
    """Done at the hub's next read (or failure): what a follower with nothing new waits on."""

    async def run(self) -> None:
        try:
            while True:
                if self.more:
                    await self.wanted.wait()
                mark = self.log.signals.next_change(self.turn_id)
                page = await self.log.read(self.chat_id, self.turn_id, after=self.tail,
                                           owner=self.owner, limit=PAGE_EVENTS)
                self._take(page)
                if not page.events:
                    await wait_change(mark, self.poll_seconds)
        except Exception as exc:  # handed to every follower, which raises it
            self.error = exc
            _HUBS.pop(self.key, None)  # the next follower starts a fresh hub
            self._wake()

    def _take(self, page: TurnLogPage) -> None:
        self.header = attrs.evolve(page, events=())
        self.more = not reaches_end(page)
        self.wanted.clear()
        if page.events:
            self.events.extend(page.events)
            self.chars += sum(len(e.data) for e in page.events)
            self.tail = page.events[-1].id
            drop = 0
            while len(self.events) - drop > BUFFER_EVENTS or self.chars > BUFFER_CHARS:
                self.chars -= len(self.events[drop].data)
                drop += 1
            if drop:
                self.start = self.events[drop - 1].id
                del self.events[:drop]
        self._wake()

    def _wake(self) -> None:
        done, self.read_done = self.read_done, asyncio.get_running_loop().create_future()
        done.set_result(None)

    def page_after(self, after: int) -> tuple[TurnLogPage | None, asyncio.Future[None]]:
        """What the hub has after ``after`` (at most ``PAGE_EVENTS`` events) and the
        future of its next read; None while it has not read yet, when ``after`` is older
        than its buffer (the follower reads on its own), or when the follower has all
        the hub read and the log holds more (the hub reads its next page now:
        ``reading``). Raises the error the hub's read raised."""
        if self.error is not None:
            raise self.error
        if self.header is None or after < self.start:
            return None, self.read_done
        first = bisect.bisect_right(self.events, after, key=lambda e: e.id)
        if first == len(self.events) and self.more:
            self.wanted.set()
            return None, self.read_done
        events = tuple(self.events[first:first + PAGE_EVENTS])
        return attrs.evolve(self.header, events=events), self.read_done

    def reading(self, after: int) -> bool:
        """Whether the hub's next read brings what a follower at ``after`` waits for:
        its first read, or the next page of a log it has not read to the end."""
        return self.header is None or (self.more and after >= self.start)

    def leave(self) -> None:
        """A follower leaves; the last one ends the hub (and lets go of its change mark
        once the turn has ended: nobody else will change it)."""
        self.followers -= 1
        if self.followers > 0:
            return
        if _HUBS.get(self.key) is self:
            del _HUBS[self.key]
        if self.task is not None:
            self.task.cancel()
        if self.header is not None and self.header.turn.status is not TurnStatus.IN_PROGRESS:
            self.log.signals.changed(self.turn_id)


def _runs_to(seed: tuple[int, TurnLogPage], after: int) -> bool:
    """Whether ``seed``'s page holds every event from its id to ``after``."""
    first, page = seed
    if not page.events:
        return first == after
    return page.events[0].id == first + 1 and page.events[-1].id == after \
        and len(page.events) == after - first


_READS: dict[_Key, tuple[int, asyncio.Task[TurnLogPage]]] = {}
"""The first read of each turn's log under way here, and the id it reads after."""


async def first_page(log: TurnLog, chat_id: str, turn_id: str, owner: str | None, *,
                     after: int) -> TurnLogPage:
    """The log after ``after``, for a follower joining the turn: from the buffer of the
    turn's hub here when it holds ``after`` (the log as of the hub's last read, at the
    turn's last change or poll); else from the read another follower's join has under
    way (it started before this join, and reads after an id no later than ``after``),
    when its page holds the events after ``after`` (it goes past it, or to the log's
    end); else a read of its own, which the followers joining while it runs share. A
    page so shared is the log as it was a moment before the join: the follower goes on
    from its last event as from any page. Its owner and chat were checked by that read
    (the key holds both); its error is raised to each follower that shared it."""
    loop = asyncio.get_running_loop()
    key: _Key = (loop, id(log), chat_id, turn_id, owner)
    hub = _HUBS.get(key)
    if hub is not None and hub.log is log and hub.error is None:
        shared, _ = hub.page_after(after)  # the turn's followers here read it last
        if shared is not None and after <= shared.last_id:
            return shared
    under_way = _READS.get(key)
    if under_way is not None and under_way[0] <= after:
        page = await asyncio.shield(under_way[1])
        if (page.events and after < page.events[-1].id) \
                or (reaches_end(page) and after <= page.last_id):  # what follows ``after``
            first = bisect.bisect_right(page.events, after, key=lambda e: e.id)
            return attrs.evolve(page, events=page.events[first:])
    read = loop.create_task(log.read(chat_id, turn_id, after=after, owner=owner,
                                     limit=PAGE_EVENTS))
    if under_way is None or after < under_way[0]:
        _READS[key] = (after, read)
        read.add_done_callback(lambda done: _read_done(key, done))
    return await asyncio.shield(read)


def _read_done(key: _Key, read: asyncio.Task[TurnLogPage]) -> None:
    """A shared read ended: later joins read again; its error is retrieved here (every
    follower that waited for it may have left)."""
    if _READS.get(key, (0, None))[1] is read:
        del _READS[key]
    if not read.cancelled():
        read.exception()


def join(log: TurnLog, chat_id: str, turn_id: str, owner: str | None, *, after: int,
         poll_seconds: float, seed: tuple[int, TurnLogPage] | None = None) -> _Hub:
    """The hub of the turn's log here, started at ``after`` when there is none (holding
    ``seed``'s page first when its events run to ``after``: the joining follower's first
    page, read after ``seed[0]``); the caller must ``leave`` it."""
    loop = asyncio.get_running_loop()
    key: _Key = (loop, id(log), chat_id, turn_id, owner)
    hub = _HUBS.get(key)
    if hub is None or hub.log is not log:
        hub = _Hub(log, chat_id, turn_id, owner, poll_seconds, key, start=after, tail=after)
        if seed is not None and _runs_to(seed, after):
            hub.start = hub.tail = seed[0]
            hub._take(seed[1])
        _HUBS[key] = hub
        hub.task = loop.create_task(hub.run(), name=f"turnstate-follow-{turn_id}")
    hub.poll_seconds = min(hub.poll_seconds, poll_seconds)
    hub.followers += 1
    return hub


