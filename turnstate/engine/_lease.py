"""The turn's hold on its chat: ``LeaseKeeper``, the heartbeat that renews the lease.

Used only by ``_lifecycle``, which owns a turn's life; this module is the lease's half of
it. A keeper renews the lease every ``interval`` (a third of the lease by default) in
its own task. A renewal the store refuses (``LeaseLost``: another turn took the chat, or
an operator released it) loses the lease at once; a renewal that fails because the store
is briefly unreachable is retried with backoff until the lease has really run out (the
local deadline is the last successful renewal's send time plus the lease). An attempt
that has no answer within an interval is given up and sent again: a renewal stuck on a
dead connection (the store's own bound may be longer than the lease) must not outlast
the lease when another connection would answer. On a loss the
keeper interrupts the turn if it is inside a provider call or a tool run (``enter`` /
``leave`` mark when the turn's code is running, so only an await inside the turn can be
interrupted, never the consumer's own), and ``check`` refuses every later step.

The keeper also holds the turn's deadline (``TurnLimits.turn_seconds``): past it,
``check`` refuses every later working step and a provider call or tool run in flight is
interrupted, as at a loss, with ``TurnDeadlineExceeded``. Its timer is armed with the
first beat (or at the start, for a deadline that comes sooner): a turn shorter than the
heartbeat's interval (a cursor turn) pays no timer for it.

Each successful beat stores the store's ``LeaseRenewal``: a frozen record, so another
per-beat fact (a stop request) is a new field read in ``_renewed``.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import weakref
from collections import deque
from collections.abc import Callable, Collection
from typing import Any, Protocol

from turnstate.core._errors import LeaseLost, TurnDeadlineExceeded
from turnstate.core._events import TurnEvent
from turnstate.providers._scrub import storable_text
from turnstate.storage._protocol import LeaseRenewal, Store, TurnLease

logger = logging.getLogger("turnstate")

if sys.version_info >= (3, 12):  # pragma: no cover - CI runs 3.11
    _current_task = asyncio.current_task
else:  # ``asyncio.current_task`` is Python on 3.11: the dict lookup it makes, directly
    _current_task = asyncio.tasks._current_tasks.get  # type: ignore[attr-defined]

RETRY_FIRST = 0.05
"""Seconds before the first retry of a failed renewal (or abort write); then doubling."""


class FirstBeats:
    """The keepers of one loop waiting ``interval`` for their first beat, with one loop
    timer for them all.

    Each waits exactly ``interval`` from its start, as with a timer of its own (a
    ``call_later`` per turn cost a ``TimerHandle``, a heap push and a cancel, and left the
    cancelled handle in the loop's heap until its time, issue 26). Starts come in time
    order, so their due times do too: the queue is first in, first out, and its timer is
    armed for the earliest keeper still waiting. A stopped keeper's entry is emptied (the
    keeper not held) and passed over when the timer reaches it.
    """

    __slots__ = ("interval", "loop", "timer", "waiting", "watch")

    def __init__(self, loop: asyncio.AbstractEventLoop, interval: float,
                 watch: Callable[[], None] | None = None) -> None:
        self.loop, self.interval = loop, interval
        self.watch = watch  # the store's ``watch_held``, called as each keeper joins
        self.waiting: deque[list[Any]] = deque()  # [when, keeper or None], in time order
        self.timer: asyncio.TimerHandle | None = None

    def add(self, keeper: LeaseKeeper) -> list[Any]:
        entry: list[Any] = [self.loop.time() + self.interval, keeper]
        self.waiting.append(entry)
        if self.timer is None:
            self._arm(entry[0])
        return entry

    def _arm(self, when: float) -> None:
        self.timer = self.loop.call_at(when, self._due)

    def _due(self) -> None:
        """Beat every keeper due by now or by the time the timer was set for (the loop
        runs a timer up to its clock's resolution early), then arm for the next one."""
        armed = self.timer.when() if self.timer is not None else 0.0
        self.timer = None
        waiting, until = self.waiting, max(self.loop.time(), armed)
        while waiting:
            when, keeper = waiting[0]
            if keeper is not None and when > until:
                self._arm(when)
                return
            waiting.popleft()
            if keeper is not None:
                keeper._first_beat()


class Followers(Protocol):
    """A turn's followers on this process (``_attached.Followers``)."""

    def publish(self, event: TurnEvent) -> bool: ...

    def close(self) -> None: ...


class LeaseKeeper:
    """Renews one turn's lease while the turn runs; knows when it is lost."""

    def __init__(self, store: Store, lease: TurnLease, *, lease_seconds: float,
                 interval: float, sent_at: float) -> None:
        self.store, self.lease = store, lease
        self.lease_seconds, self.interval = lease_seconds, interval
        self._loop = asyncio.get_running_loop()
        self.deadline = sent_at + lease_seconds
        self.sent_at = sent_at  # when the begin was sent (loop time)
        self.lost: str | None = None
        self.renewal: LeaseRenewal | None = None
        self._task: asyncio.Task[None] | None = None
        self._entry: list[Any] | None = None  # [when, self] in its FirstBeats, until then
        self._stopped = False
        self._driver: asyncio.Task[object] | None = None
        self._interruptible = False
        self._interrupting = False
        self.stop_asked = False  # a stop for a turn its consumer iterates (``_attached``)
        self._stopping = False  # the stop interrupted the turn
        self._stop_cancelled = False  # ... by cancelling the driver
        self.followers: Followers | None = None  # ``follow`` of it here (``_attached``)
        # The turn's deadline (loop time; ``inf``: none), its timer once armed, whether
        # it passed (the timer ran), and whether its interrupt cancelled the driver.
        self.seconds, self.expires = float("inf"), float("inf")
        self._timer: asyncio.TimerHandle | None = None
        self.expired = False
        self._expiring = False

    # -- the turn's side ---------------------------------------------------------------

    def start(self, beats: FirstBeats | None, seconds: float = float("inf")) -> FirstBeats:
        """Beat from one interval on. Until the first beat the heartbeat is an entry in
        ``beats`` (or, when that queue serves another loop or interval, in a new one),
        not a task nor a timer of its own: a turn shorter than the interval (a cursor
        turn) pays neither. The turn's deadline is ``seconds`` after its begin was sent
        (``sent_at``): its timer is armed now if it comes before the first beat, else by that
        beat. Returns the queue it joined, for the next keeper."""
        self.seconds, self.expires = seconds, self.sent_at + seconds
        if self.expires - self._loop.time() <= self.interval:
            self._timer = self._loop.call_at(self.expires, self._expire)
        if beats is None or beats.loop is not self._loop or beats.interval != self.interval:
            beats = FirstBeats(self._loop, self.interval, fence_watch(self.store))
        self._entry = beats.add(self)
        if beats.watch is not None:  # the store looks for this turn's fence (lifecycle6)
            beats.watch()
        return beats

    def _first_beat(self) -> None:
        self._entry = None
        if not self._stopped:
            self._task = self._loop.create_task(self._beat())
            if self._timer is None and self.expires < float("inf"):
                self._timer = self._loop.call_at(self.expires, self._expire)

    def stop(self) -> None:
        """Stop beating. A renewal still in flight is fenced: once the turn released the
        chat it matches nothing, so it needs no waiting for."""
        self._stopped = True
        if self.followers is not None:  # the turn has ended: its followers are told
            self.followers.close()
        if self._entry is not None:
            self._entry[1] = None  # its queue passes over it (and holds this keeper no more)
            self._entry = None
        if self._task is not None:
            self._task.cancel()
            self._task = None
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def enter(self, interruptible: bool) -> None:
        """The turn's code runs now (until ``leave``); a loss may interrupt it when
        ``interruptible`` (a provider call or a tool run, not a commit or an abort)."""
        self._driver = _current_task(self._loop)
        self._interruptible = interruptible
        if self.stop_asked and interruptible and not self._stopping:
            self._stopping = True  # asked while the consumer's code ran: end here
            raise asyncio.CancelledError

    def reenter(self, interruptible: bool) -> None:
        """``enter`` again once the consumer has taken an event. A loss while the
        consumer held the turn could interrupt nothing (``_lose`` found no driver): an
        interruptible action then ends here, with ``LeaseLost``, instead of running on
        to its end (a provider's whole answer, or a hung stream for ever)."""
        self.enter(interruptible)
        if interruptible and self.lost is not None:
            raise LeaseLost(self.lease.chat_id, self.lease.turn_id, self.lease.epoch)
        if interruptible and self.expired:  # it passed while the consumer held the turn
            raise TurnDeadlineExceeded(self.seconds, "while the consumer read an event")

    def leave(self) -> None:
        self._driver = None

    def check(self) -> None:
        """Before a side effect: raise ``LeaseLost`` once the lease is lost or ran out;
        before a working state's (``enter``'d interruptible: not the commit, not the
        abort), ``TurnDeadlineExceeded`` once the turn's deadline passed."""
        now = self._loop.time()
        if self.lost is None and now >= self.deadline:
            self.lost = "the lease ran out before it could be renewed"
        if self.lost is not None:
            raise LeaseLost(self.lease.chat_id, self.lease.turn_id, self.lease.epoch)
        if self._interruptible and (self.expired or now >= self.expires):
            self.expired = True
            raise TurnDeadlineExceeded(self.seconds, "before its next step")

    def took_deadline(self) -> bool:
        """After a ``CancelledError`` in the turn's code: was it the deadline's interrupt
        (and no other cancellation)? Then it is undone and the turn ends
        ``deadline_exceeded``."""
        if not self._expiring:
            return False
        self._expiring = False
        task = asyncio.current_task()
        return task is None or task.uncancel() == 0

    def _expire(self) -> None:
        """The deadline's timer: the turn's provider call or tool run in flight is
        interrupted now; one that is not running is refused at its next step."""
        self._timer = None
        self.expired = True
        driver = self._driver
        if (driver is not None and self._interruptible and not self._interrupting
                and not self._expiring and not self._stopping):
            self._expiring = True
            driver.cancel()

    def took_interrupt(self) -> bool:
        """After a ``CancelledError`` in the turn's code: was it this keeper's interrupt
        (and no other cancellation)? Then it is undone and the turn ends ``lease_lost``."""
        if not self._interrupting:
            return False
        self._interrupting = False
        task = asyncio.current_task()
        return task is None or task.uncancel() == 0

    def ask_stop(self) -> None:
        """A stop for this turn (``_attached``): the driver is interrupted now if it is
        inside a provider call or a tool run, else at its next ``enter`` (never inside the
        consumer's own code, nor in a commit or an abort)."""
        self.stop_asked = True
        driver = self._driver
        if (driver is not None and self._interruptible and not self._stopping
                and driver is not _current_task(self._loop)):
            self._stopping = self._stop_cancelled = True
            driver.cancel()

    def took_stop(self) -> bool:
        """After a ``CancelledError`` that ended the turn: was it this keeper's stop?
        Then the cancel it sent, if any, is undone (the turn ends ``stopped`` and goes on
        yielding its last events)."""
        if not self._stopping:
            return False
        task = asyncio.current_task()
        if self._stop_cancelled and task is not None and task.cancelling():
            self._stop_cancelled = False
            task.uncancel()
        return True

    def fenced(self, detail: str) -> None:
        """A fenced write of the turn's (its log's append) was refused, or the store
        signalled the fence: the lease is gone, whatever the heartbeat has heard yet.
        Lost now, as a refused renewal; a lease already lost is not lost again (a
        store's watch may signal it more than once: the turn is ending already)."""
        if self.lost is None:
            self._lose(detail)

    def remaining(self) -> float:
        """Seconds until the lease runs out, as far as this process knows."""
        return self.deadline - self._loop.time()

    async def still_held(self) -> bool:
        """One renewal now: False when the store says the lease is gone."""
        if self.lost is not None:
            return False
        sent = self._loop.time()  # the deadline counts from the send, as the heartbeat's
        try:
            self._renewed(await self.store.renew_lease(self.lease, self.lease_seconds), sent)
        except LeaseLost as exc:
            self._lose(storable_text(str(exc)))
            return False
        except Exception:  # unknown: the fenced commit's refusal stands as a conflict
            return True
        return True

    # -- the heartbeat -----------------------------------------------------------------

    async def _beat(self) -> None:
        renewed = await self._renew()
        while renewed:
            await asyncio.sleep(self.interval)
            renewed = await self._renew()

    async def _renew(self) -> bool:
        """True once renewed; False when the lease is lost."""
        delay = min(RETRY_FIRST, self.interval)
        while True:
            sent = self._loop.time()
            if sent >= self.deadline:  # (the process was frozen past it): not renewed now
                self._lose("the lease ran out before it could be renewed")
                return False
            try:  # stuck: sent again after an interval, given up at the deadline itself
                async with asyncio.timeout_at(min(sent + self.interval, self.deadline)):
                    renewal = await self.store.renew_lease(self.lease, self.lease_seconds)
            except LeaseLost as exc:
                self._lose(storable_text(str(exc)))
                return False
            except Exception as exc:  # the store is down or failing: retry within the lease
                if self._loop.time() + delay >= self.deadline:
                    self._lose("the lease ran out while the store could not be reached: "
                               + storable_text(str(exc) or type(exc).__name__, 200))
                    return False
                logger.warning("renewing the lease of turn %s failed (%s); retrying",
                               self.lease.turn_id, type(exc).__name__)
                await asyncio.sleep(delay)
                delay = min(delay * 2, self.interval)
                continue
            self._renewed(renewal, sent)
            return True

    def _renewed(self, renewal: LeaseRenewal, sent: float) -> None:
        self.renewal = renewal
        self.deadline = max(self.deadline, sent + self.lease_seconds)

    def _lose(self, detail: str) -> None:
        if self.lost is None:
            self.lost = detail
            logger.warning("turn %s lost the lease of chat %s: %s", self.lease.turn_id,
                           self.lease.chat_id, detail)
        driver = self._driver
        if (driver is not None and self._interruptible and not self._interrupting
                and not self._expiring):  # a deadline's interrupt is ending it already
            self._interrupting = True
            driver.cancel()



class FenceWatcher(Protocol):
    """What ``watch_fences`` tells (``TurnEngine``)."""

    attached: dict[str, LeaseKeeper]  # the turns it runs (``run_turn`` and detached)

    def fence_signalled(self, turn_id: str) -> None: ...


def fence_watch(store: object) -> Callable[[], None] | None:
    """The store's ``watch_held`` (lifecycle6): called as a turn starts, it makes sure
    the store looks for fences of the turns running here that no signal of its own
    would reach (PostgreSQL: listening for notifications; SQLite: the file's watch).
    None for a store whose signals need nothing (memory: one process)."""
    watch: Callable[[], None] | None = getattr(
        getattr(store, "turn_log", None), "watch_held", None)
    return watch


def watch_fences(store: object, engine: FenceWatcher) -> Callable[[], None]:
    """Have ``engine.fence_signalled`` called for every turn the store's signals say
    lost its lease (``TurnSignals.fenced``); returns the unsubscribe. The store holds
    the engine weakly: an engine let go without ``aclose`` is unsubscribed at the next
    signal. A store without signals: nothing to watch (its turns learn a fence at their
    next renewal)."""
    signals = getattr(getattr(store, "turn_log", None), "signals", None)
    on_fenced = getattr(signals, "on_fenced", None)
    if on_fenced is None:
        return _nothing
    method = weakref.WeakMethod(engine.fence_signalled)
    held_by = getattr(signals, "held_by", None)
    owner = weakref.ref(engine)

    def held() -> Collection[str]:  # the turns it runs, for a store's own watch
        alive = owner()
        return () if alive is None else alive.attached.keys()

    def fenced(turn_id: str) -> None:
        signalled = method()
        if signalled is None:
            unsubscribe()
        else:
            signalled(turn_id)

    subscribed: Callable[[], None] = on_fenced(fenced)
    unheld: Callable[[], None] = _nothing if held_by is None else held_by(held)
    done = False

    def unsubscribe() -> None:
        nonlocal done
        if not done:
            done = True
            subscribed()
            unheld()

    return unsubscribe


def _nothing() -> None:
    return None
