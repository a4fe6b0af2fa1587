"""Turns that outlive their connection: run detached, followed from any node, stopped from
anywhere.

``DetachedTurns`` (one per engine, ``TurnEngine.detached``) runs each turn in its own
task, so the turn goes on to its end when the client that started it leaves. It

- numbers the turn's events and fans them out in process (``LiveTurn``); the streams
  waiting for the final event send it before the turn's teardown runs (one loop step),
  and the task ends with the turn, not with its log write (the turn stays followable
  here until the writer has logged its final event);
- writes them to the store's turn-events log (``_turn_log``) in batches: one writer task
  for every turn here, each ``flush_seconds`` one ``append_many`` with every turn's new
  events (so at most ``1 / flush_seconds`` writes per second, per turn and in all, however
  many deltas and turns there are), each turn's final event last; past ``cap_bytes`` the
  log keeps only the final event;
- lets any node follow a turn (``follow``): from memory when the turn runs here, else
  from the log, woken by the store's signals (PostgreSQL ``LISTEN/NOTIFY``) or polling;
- records stops in the store (``stop``), so the node running the turn learns them at
  once on the same process, by notification across processes, and by polling the log
  every ``stop_poll_seconds`` if a notification was lost; the turn then ends ``stopped``;
- deletes the logs of turns that ended more than ``retention_seconds`` ago (``expire``),
  and ends every running turn ``cancelled`` with a final event on ``close`` (shutdown);
- ends the turns of a node that died (``reclaim``: their leases ran out), so that the
  streams following them get their final event (``maintain`` runs both sweeps).

The maintenance (``settled``, ``expire``, ``reclaim``, ``maintain``, ``close``,
``abandon``) is ``_detached_upkeep``'s ``DetachedUpkeep``, a mixin of ``DetachedTurns``.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import AsyncIterator, Callable, Sequence

import attrs

from turnstate.core._errors import (
    InvalidInput,
    StorageError,
    TurnFinished,
)
from turnstate.core._errors_storage import STORAGE_OUTAGES
from turnstate.core._event_json import event_json
from turnstate.core._events import TurnEvent
from turnstate.engine._attached import follow_attached
from turnstate.engine._detached_upkeep import DetachedUpkeep, Engine, _listen
from turnstate.engine._follow import Following, follow_log, synthesized_final
from turnstate.engine._lease import LeaseKeeper
from turnstate.engine._live import AFTER, LiveTurn
from turnstate.engine._stop_outage import local_record, stop_written, stoppable_here
from turnstate.engine._turn_input import TurnInput
from turnstate.states._table import State, Trigger
from turnstate.storage._protocol import TurnRecord, TurnStatus
from turnstate.storage._turn_log import TurnLog, TurnLogFenced, log_batch, turn_log_of

logger = logging.getLogger("turnstate")

DEFAULT_FLUSH_SECONDS = 0.05
LOG_RETRY_SECONDS = 10.0
"""How long failed writes of an ended turn's last events are retried (a database restart
of a few seconds) before the log gives up on them (its readers then rebuild the end)."""
DEFAULT_CAP_BYTES = 8 * 1024 * 1024
DEFAULT_RETENTION_SECONDS = 600.0
DEFAULT_STOP_POLL_SECONDS = 2.0

Encode = Callable[[TurnEvent], str]


class DetachedTurns(DetachedUpkeep):
    """The detached turns of one engine on this process (see the module docstring)."""

    def __init__(self, engine: Engine, *, encode: Encode = event_json,
                 flush_seconds: float = DEFAULT_FLUSH_SECONDS,
                 cap_bytes: int = DEFAULT_CAP_BYTES,
                 retention_seconds: float = DEFAULT_RETENTION_SECONDS,
                 stop_poll_seconds: float = DEFAULT_STOP_POLL_SECONDS,
                 on_finished: Callable[[LiveTurn], None] | None = None) -> None:
        self.engine, self.encode = engine, encode
        self.flush_seconds, self.cap_bytes = flush_seconds, cap_bytes
        self.retention_seconds, self.stop_poll_seconds = retention_seconds, stop_poll_seconds
        self.on_finished = on_finished
        self.live: dict[str, LiveTurn] = {}
        self._unlogged: dict[str, LiveTurn] = {}  # turns with events the log lacks
        self._writer: asyncio.Task[None] | None = None
        self._log: TurnLog | None = None
        self._poller: asyncio.Task[None] | None = None
        self.closing = False  # ``close`` has begun: a turn that starts now ends at once
        self._starting: set[asyncio.Future[None]] = set()  # starts in flight, for ``close``
        self._opening: set[str] = set()  # turns started here, not yet in ``live``
        self._late = 0  # turns that began while ``close`` ran (ended ``cancelled``)
        self._stop_writes: set[asyncio.Task[None]] = set()  # stops asked in an outage

    def configure(self, **options: object) -> None:
        """Change options (``encode``, ``flush_seconds``, ...) before turns run."""
        for name, value in options.items():
            if not hasattr(self, name) or name in {"engine", "live"}:
                msg = f"unknown option {name!r}"
                raise TypeError(msg)
            setattr(self, name, value)

    @property
    def log(self) -> TurnLog:
        if self._log is None:
            self._log = turn_log_of(self.engine.store)
            self._log.signals.on_stop(self._stop_signalled)
        return self._log

    # -- running ----------------------------------------------------------------------

    async def start(self, chat_id: str, turn: TurnInput) -> LiveTurn:
        """Start ``turn`` detached; returns once its first event is out.

        Raises what ``run_turn`` raises before its first event (``ChatNotFound``,
        ``ChatBusy``, ``InvalidInput``, ``ConfigurationError``), with nothing held.
        """
        starting = asyncio.get_running_loop().create_future()
        self._starting.add(starting)  # ``close`` waits for it: its turn may take a lease
        try:
            live = await self._start(chat_id, turn)
            if self.closing:  # it began while ``close`` ran: ended as the others were
                self._late += 1
                self._end(live, Trigger.CANCELLED)
            return live
        finally:
            self._starting.discard(starting)
            starting.set_result(None)

    async def _start(self, chat_id: str, turn: TurnInput) -> LiveTurn:
        log = self.log
        await _listen(log)
        if turn.turn_id is None:
            turn = attrs.evolve(turn, turn_id=uuid.uuid4().hex)
        assert turn.turn_id is not None
        earlier = self.live.get(turn.turn_id)
        if earlier is not None and earlier.done:  # a retry of a turn not yet logged here:
            await earlier.logged.wait()  # its log first (it is let go then), one id each
        events = aiter(self.engine.run_detached_turn(chat_id, turn))
        self._opening.add(turn.turn_id)  # not followed as an attached turn meanwhile
        try:
            first = await anext(events)
        except BaseException:
            await events.aclose()  # type: ignore[attr-defined]
            raise
        finally:
            self._opening.discard(turn.turn_id)
        live = LiveTurn(chat_id=chat_id, turn_id=turn.turn_id, owner=turn.owner,
                        provider=turn.provider, model=turn.model, cap_bytes=self.cap_bytes)
        self._publish(live, first, self.encode(first))
        self.live[live.turn_id] = live
        live.task = asyncio.create_task(self._run(live, events), name=f"turn {live.turn_id}")
        self._ensure_poller()
        return live

    async def _run(self, live: LiveTurn, events: AsyncIterator[TurnEvent]) -> None:
        live.started = True
        try:
            try:
                async for event in events:
                    if self._publish(live, event, self.encode(event)) and live.done:
                        await asyncio.sleep(0)  # one loop step: the streams waiting for
                        # the final event send it before the teardown below runs
                    elif live.stop_requested and live.stoppable:
                        self._end(live, Trigger.STOPPED)
            except asyncio.CancelledError:
                pass  # the engine was cancelled without our asking (the loop is closing)
            except Exception:  # a bug (an event that would not encode): end, say so
                logger.exception("[turn-log] turn %s: its runner failed", live.turn_id)
            finally:
                await events.aclose()  # type: ignore[attr-defined]
            self.engine.endings.pop(live.turn_id, None)
            task = asyncio.current_task()
            while task is not None and task.cancelling():
                task.uncancel()  # asked by us, and the turn ended as asked
            if live.final is None:  # cancelled before its machine ran: read its record
                final = await synthesized_final(self.engine.store, live.chat_id, live.turn_id)
                self._publish(live, final, self.encode(final))
        finally:
            if live.final is None:  # pragma: no cover - the store failed to say
                self._publish(live, _placeholder(live), self.encode(_placeholder(live)))
            live.ran_out = True  # no wait for the log: the writer lets it go once logged
            if live.logged.is_set():
                self._let_go(live)
            if self.on_finished is not None:
                self.on_finished(live)

    def cancel(self, turn_id: str) -> None:
        """End a turn running here ``cancelled`` (its client left and asked for that)."""
        live = self.live.get(turn_id)
        if live is not None:
            self._end(live, Trigger.CANCELLED)

    def _end(self, live: LiveTurn, trigger: Trigger) -> None:
        if live.task is not None and not live.task.done() and not live.done:
            self.engine.endings[live.turn_id] = trigger
            if live.started:
                live.task.cancel()
            else:  # a cancel before its first step would skip its runner's ``finally``
                # (the turn's end, its log, its lease): asked again once it has begun,
                # its first step being already scheduled ahead of this callback
                asyncio.get_running_loop().call_soon(self._end, live, trigger)

    # -- the log ----------------------------------------------------------------------

    def _publish(self, live: LiveTurn, event: TurnEvent, data: str) -> bool:
        """Number and fan out ``event`` (whether a follower was waiting for it); the log
        writer takes it at its next tick."""
        followed = live.publish(event, data)
        if live.turn_id not in self._unlogged:
            self._unlogged[live.turn_id] = live
            if self._writer is None or self._writer.done():
                self._writer = asyncio.create_task(self._write_logs(), name="turn log writer")
        return followed

    async def _write_logs(self) -> None:
        """The log writer of every turn on this process: each ``flush_seconds`` (so at
        most that often per turn, however many deltas arrive), the events published since
        its last write, every turn's in one ``append_many``; it stops when none is left."""
        while self._unlogged:
            await asyncio.sleep(self.flush_seconds)  # the rate limit, not a synchronisation
            turns = [(live, live.last_id) for live in self._unlogged.values()]
            self._unlogged.clear()
            for live, _ in turns:
                if live.log_failed_at is not None:
                    await self._resync(live)
            batches = [log_batch(live.turn_id, live.after(live.logged_through),
                                 live.truncated and not live.truncation_logged)
                       for live, _ in turns]
            try:
                outcomes: Sequence[StorageError | None] = await self.log.append_many(batches)
            except StorageError as exc:
                outcomes = [exc] * len(batches)
            for (live, through), batch, outcome in zip(turns, batches, outcomes, strict=True):
                self._logged(live, through, batch.truncate, outcome)

    def _logged(self, live: LiveTurn, through: int, truncated: bool,
                outcome: StorageError | None) -> None:
        """After a write of the turn's events up to ``through``: it is logged to its final
        event, or waits for the next tick (newer events; a failed write, retried while the
        turn runs and for ``LOG_RETRY_SECONDS`` after its end)."""
        if isinstance(outcome, TurnLogFenced):  # the lease was taken: the turn stops now
            _fenced(self.engine.attached.get(live.turn_id), outcome)
        if outcome is None:
            live.logged_through = through
            live.truncation_logged = live.truncation_logged or truncated
            live.log_failed_at = None
        elif live.log_failed_at is None:  # once per outage, not at every retry's tick
            logger.warning("[turn-log] turn %s: could not log events (retrying): %s",
                           live.turn_id, outcome)
            live.log_failed_at = time.monotonic()
        if live.done and ((through == live.last_id and outcome is None)
                          or (outcome is not None and self._gave_up(live, outcome))):
            live.logged.set()  # the final event is in the log (or the log gave up on it)
            if live.ran_out:  # else its runner lets it go when it ends
                self._let_go(live)
        elif outcome is not None or live.last_id > through:
            self._unlogged.setdefault(live.turn_id, live)

    def _gave_up(self, live: LiveTurn, outcome: StorageError) -> bool:
        """Whether an ended turn's failed write is not tried again: the store is not
        away (the turn or its chat was deleted) or has been for ``LOG_RETRY_SECONDS``."""
        assert live.log_failed_at is not None
        if not isinstance(outcome, STORAGE_OUTAGES):
            return True
        if time.monotonic() - live.log_failed_at < LOG_RETRY_SECONDS:
            return False
        logger.warning("[turn-log] turn %s: gave up logging its last events after %g s",
                       live.turn_id, LOG_RETRY_SECONDS)
        return True

    async def _resync(self, live: LiveTurn) -> None:
        """After a failed write: what the log holds of the turn. A write whose reply was
        lost may have landed, and the log takes no id twice: the events it holds are not
        sent again."""
        try:
            page = await self.log.read(live.chat_id, live.turn_id,
                                       after=live.logged_through, limit=1)
        except Exception:  # still failing: the write is tried (and fails) as it was
            return
        live.logged_through = max(live.logged_through, min(page.last_id, live.last_id))

    def _let_go(self, live: LiveTurn) -> None:
        """``live`` ran out and is logged: no longer followed from here (only itself, not
        a later turn that reused its id)."""
        if self.live.get(live.turn_id) is live:
            del self.live[live.turn_id]

    # -- following and stopping ---------------------------------------------------------

    async def follow(self, chat_id: str, turn_id: str, *, after: int = 0,
                     owner: str | None = None) -> Following:
        """The turn's events after ``after``: from memory when it runs here, else the log.

        Raises ``TurnNotFound`` (unknown, another chat's or another owner's turn, the
        owner checked on the chat's record when the turn's ``TurnInput`` named none) and
        ``InvalidInput`` (field ``after``) for an id beyond the turn's last event, a
        negative one or one that is no ``int``.
        """
        if type(after) is not int or after < 0:  # a bool, a float, a header's text
            msg = f"must be a whole number from 0 (an event id taken), got {after!r}"
            raise InvalidInput(AFTER, msg)
        live = self.live.get(turn_id)
        if live is not None and live.chat_id == chat_id \
                and (owner is None or live.owner in (None, owner)):
            if owner is not None and live.owner is None:  # the turn named no owner:
                await self.log.read(chat_id, turn_id, owner=owner, limit=1)  # the chat's
            live.check_after(after)
            return Following(notice=live.notice(after), batches=live.follow_batches(after))
        keeper = self.engine.attached.get(turn_id)  # one its consumer iterates here
        if keeper is not None and keeper.lease.chat_id == chat_id \
                and turn_id not in self._opening:
            following = await follow_attached(self.engine, self.log, keeper, after=after,
                                              owner=owner, encode=self.encode)
            if following is not None:
                return following
        await _listen(self.log)
        return await follow_log(self.engine.store, self.log, chat_id, turn_id, after=after,
                                owner=owner, encode=self.encode,
                                poll_seconds=self.stop_poll_seconds, now=self.engine.clock)

    async def stop(self, turn_id: str, *, owner: str | None = None,
                   chat_id: str | None = None) -> TurnRecord:
        """Record a stop request for the turn, wherever it runs; returns its record. With
        the store away, a turn running here stops at once, its request written once the
        store returns (``_stop_outage``).

        Raises ``TurnNotFound`` (also for another owner's turn) and ``TurnFinished`` when
        the turn had already ended (naming the state it ended in).
        """
        try:
            if chat_id is None:
                chat_id = (await self.engine.store.load_turn(turn_id)).chat_id
            record = await self.log.request_stop(chat_id, turn_id, owner=owner)
        except STORAGE_OUTAGES:  # the store away: a turn running here stops all the same
            live, keeper = self.live.get(turn_id), self.engine.attached.get(turn_id)
            if live is None or keeper is None or not stoppable_here(live, chat_id, owner):
                raise
            self._stop_signalled(turn_id)
            write = asyncio.create_task(stop_written(self.log, live, owner,
                                                     self.engine.lease_seconds),
                                        name=f"stop {turn_id}")
            self._stop_writes.add(write)
            write.add_done_callback(self._stop_writes.discard)
            return local_record(live, keeper)
        if record.status is not TurnStatus.IN_PROGRESS:
            state = State.DONE if record.status is TurnStatus.COMPLETED else State.ABORTED
            raise TurnFinished(turn_id, state.value, record.reason)
        self._stop_signalled(turn_id)
        return record

    def _stop_signalled(self, turn_id: str) -> None:
        live = self.live.get(turn_id)
        if live is None:  # a turn a consumer iterates here (``run_turn``) stops too
            attached = self.engine.attached.get(turn_id)
            if attached is not None:
                attached.ask_stop()
            return
        if live.stop_requested:
            return
        live.stop_requested = True
        if live.stoppable:
            self._end(live, Trigger.STOPPED)

    def _ensure_poller(self) -> None:
        if self._poller is None or self._poller.done():
            self._poller = asyncio.create_task(self._poll_stops(), name="turn stop poller")

    async def _poll_stops(self) -> None:
        """While turns run here, ask the log for stop requests a notification missed."""
        while self.live:
            await asyncio.sleep(self.stop_poll_seconds)  # the polling period
            running = [t for t, live in self.live.items() if not live.stop_requested]
            try:
                stopped = await self.log.stop_requests(running)
            except StorageError as exc:
                logger.warning("[turn-log] cannot check stop requests: %s", exc)
                continue
            for turn_id in stopped:
                self._stop_signalled(turn_id)


def _fenced(keeper: LeaseKeeper | None, refusal: TurnLogFenced) -> None:
    """A turn whose log append was refused lost its lease: its keeper stops it at once
    (a provider call or tool run in flight is cancelled), not at its next renewal."""
    if keeper is not None:
        keeper.fenced(str(refusal))


def _placeholder(live: LiveTurn) -> TurnEvent:  # pragma: no cover - a store that failed
    from turnstate.core._events import TurnAborted, TurnStats  # noqa: PLC0415

    return TurnAborted(turn_id=live.turn_id, chat_id=live.chat_id, reason="cancelled",
                       detail="the turn's outcome could not be read", strategy=None,
                       degradation=None, path=(), stats=TurnStats())
