"""A turn's life, owned end to end: how a turn begins, runs and ends, read top to bottom.

1. **Input.** ``run`` refuses bad input (``InvalidInput``), an unknown provider or one
   without an adapter, before anything is touched.
2. **Lease.** ``_take`` runs ``begin_turn`` eagerly (``_eager``); if it suspends, the
   rest runs as a task awaited through ``shield``: a cancel that arrives while it is in
   flight waits for the write and releases what it took, so a cancelled begin never
   leaves a lease nobody owns; a begin whose reply was lost (``StorageUnavailable``) is
   read back and released likewise. A reused turn id is answered from the store
   (``_retried``): a completed turn's outcome again, ``ChatBusy`` for a running one,
   ``TurnAlreadyRecorded`` for an aborted one (or one whose lease ran out).
3. **Heartbeat.** A ``LeaseKeeper`` (``_lease``) renews the lease every lease/3. The lease
   is checked before every state's action, so before each provider request, tool run and
   commit; a loss also interrupts a provider call or tool run in flight. Either way the
   turn fires ``lease_lost`` and nothing more is sent or run.
4. **Drive.** ``run``'s drive loop (in ``run`` itself: an event crosses no other level of
   the lifecycle) performs one action per state (``_steps``; the commit and the abort are
   here) and turns what comes out of it into one trigger: an action's own
   ``Fire``; ``lease_lost`` for a lost lease (a refused fenced write included);
   ``storage_failed`` for any other store failure; ``internal_error`` (logged with its
   traceback) for anything else. A provider call's state whose action failed on a
   transient store error before it sent a request (its history or media read, the
   store away for a moment) runs again after a pause, while the lease lasts less the
   abort's margin (``_patience.again``), instead of ending ``storage_failed``. A
   degradation's write is made here too: one whose reply was lost is read back, and
   sent again only if it did not land.
5. **Commit.** The commit runs as a shielded task: its outcome decides the turn, whatever
   happens meanwhile. A refused commit is ``commit_conflict`` (``lease_lost`` when the
   lease is gone), without a traceback; a commit whose reply was lost (the connection
   dropped after sending) is settled by re-reading the turn: ``turn_completed`` if it
   landed, else it is sent again, each send retried with backoff on a transient error
   while the lease, as it stood at the first failure, lasts less the abort's margin (one
   budget for all the sends, ``_patience``): ``commit_failed`` only once it is spent.
6. **Every exit releases.** The abort is recorded with a storable detail (scrubbed,
   lone surrogates replaced, bounded), retried with backoff while the lease lasts, and
   without its parts if the store refuses them; failing all that, the short lease frees
   the chat. Cancellation (the task cancelled, ``aclose()``, a dropped iterator) ends the
   turn ``cancelled`` (a commit in flight decides instead) and re-raises; a cancel that
   interrupts the ending itself still records the abort in ``run``'s ``finally``.

This module decides, its steps 1-3 in ``_life_begin`` (``TurnBegin``, a mixin of
``TurnLife``); ``_writes`` holds the mechanics of each write it decides on (the
commit's wait and read-back, the degradation write's read-back, the abort's retries, a
never-started turn's record).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, Callable

from turnstate.core._context import ContextSnapshot
from turnstate.core._decisions import Strategy
from turnstate.core._envelope import remember_envelope
from turnstate.core._errors import CommitConflict, StorageError, TurnDeadlineExceeded
from turnstate.core._events import ContextSnapshotEvent, StateChanged, TurnEvent, state_changed
from turnstate.core._frozen import slot_maker
from turnstate.engine._eager import eager_future
from turnstate.engine._lease import LeaseKeeper
from turnstate.engine._life_begin import TurnBegin, TurnOwner
from turnstate.engine._patience import Rerun, again, patiently
from turnstate.engine._run import STRATEGY_OF, TurnRun
from turnstate.engine._step_values import FIRED, Action, Fire, Step, Transition
from turnstate.engine._steps import TurnSteps, final_event
from turnstate.engine._stopping import end_on_request
from turnstate.engine._tracing import TurnSpans
from turnstate.engine._turn_input import TurnInput
from turnstate.engine._writes import (
    abort_reason,
    commit_outcome,
    internal_detail,
    interrupted_abort,
    lease_lost,
    record_abort,
    record_transition,
)
from turnstate.providers._scrub import storable_text
from turnstate.states._table import CALL_STATES, FINAL_STATES, State, Trigger

logger = logging.getLogger("turnstate")

# without attrs' __init__ (_frozen)
_snapshot_event: Callable[[ContextSnapshot], ContextSnapshotEvent] = (
    slot_maker(ContextSnapshotEvent))
_QUIET = frozenset({State.PERSIST, State.ABORT})  # a lease loss never interrupts these


class TurnLife(TurnBegin):
    """The life of one turn on ``engine``: created per ``run_turn`` call."""

    def __init__(self, engine: TurnOwner, chat_id: str, turn: TurnInput, *,
                 attached: bool) -> None:
        self.engine, self.chat_id, self.turn = engine, chat_id, turn
        self.attached = attached
        self.store = engine.store
        self.steps = TurnSteps(engine)
        self.outage: Rerun | None = None  # an action run again after an outage (``again``)

    async def run(self) -> AsyncGenerator[TurnEvent, None]:  # noqa: PLR0912, PLR0915 - one loop, inline
        begun = await self._begin()
        if isinstance(begun, list):  # the turn's events without a run of its own
            for event in begun:
                yield event
            return
        run, keeper = begun
        self.engine.attached[run.lease.turn_id] = keeper  # ``TurnEngine.stop`` reaches it
        spans, observe = self._observed(run)
        try:
            # 4. The drive loop, in this generator: an event crosses no other level of
            # the lifecycle on its way out (issue 26).
            try:
                while (current := run.current) not in FINAL_STATES:
                    outcome: Fire | None = None
                    quiet = current in _QUIET
                    keeper.enter(interruptible=not quiet)
                    action: Action | None = None
                    requests = run.stats.requests  # none sent by it: ``again`` may rerun it
                    try:
                        action = self._act(run, keeper)
                        if not isinstance(action, tuple):  # a generator: its steps as they come
                            async for step in action:
                                if isinstance(step, Fire | Transition):
                                    outcome = await _taken(keeper, step, outcome)
                                    continue
                                keeper.leave()  # an event, or a chunk's events as a list
                                for one in step if isinstance(step, list) else (step,):
                                    if observe is not None:
                                        observe()
                                    # followers (``_attached``): a test, no call, if none
                                    keeper.followers and keeper.followers.publish(one)
                                    yield one
                                keeper.reenter(interruptible=not quiet)
                        # made at once (``_act``): its events, then its trigger
                        made, outcome = action if isinstance(action, tuple) else ((), outcome)
                    except BaseException as exc:  # what ended the action: ``_caught``
                        await _closed(action)  # what ``aclosing`` did, paid only here
                        self.outage = again(run, keeper, exc, requests, self.outage)
                        if (rerun := self.outage) is None:
                            made, outcome = (), self._caught(run, keeper, exc)
                        elif (paused := await _paused(run, keeper, rerun.delay)) is None:
                            continue  # the same state's action again, after the outage
                        else:
                            made, outcome = (), paused
                    fire = _settled(run, keeper, outcome)
                    for one in made:
                        if observe is not None:
                            observe()
                        keeper.followers and keeper.followers.publish(one)
                        yield one
                    changed = self._fire(run, fire)
                    if observe is not None:
                        observe()
                    keeper.followers and keeper.followers.publish(changed)
                    yield changed
                if observe is not None:
                    observe()
                final = final_event(run)
                keeper.followers and keeper.followers.publish(final)
                yield final
            except (asyncio.CancelledError, GeneratorExit) as exc:
                for one in await self._ended(run, keeper, exc):
                    if observe is not None:
                        observe()
                    keeper.followers and keeper.followers.publish(one)
                    yield one
        except BaseException as exc:  # 6. every way out releases, as ``finally`` would
            await self._released(run, keeper, spans, exc if isinstance(exc, Exception) else None)
            raise
        await self._released(run, keeper, spans, None)

    def _observed(self, run: TurnRun) -> tuple[TurnSpans | None, Callable[[], None] | None]:
        """The turn's spans, if traced, and what reads them before each event (None for
        an untraced turn: no call per event): off the path, not by a wrapping generator
        (one generator less per event, issue 26)."""
        spans = self.engine.tracer.spans(run) if self.engine.tracer is not None else None
        return spans, None if spans is None else spans.observe

    async def _released(self, run: TurnRun, keeper: LeaseKeeper, spans: TurnSpans | None,
                        error: Exception | None) -> None:
        """6. The turn's spans ended and its hold given up, however it ended; an ending
        that was itself interrupted records the abort here."""
        if spans is not None:
            spans.finish(error)
        keeper.stop()
        self.engine.attached.pop(run.lease.turn_id, None)
        self.engine.machine.remove_model(run.machine_model)
        if run.current not in FINAL_STATES:  # the ending itself was interrupted
            await record_abort(keeper, interrupted_abort(run))

    # -- 4. the drive loop (in ``run``) ---------------------------------------------------

    async def _ended(self, run: TurnRun, keeper: LeaseKeeper,
                     exc: asyncio.CancelledError | GeneratorExit) -> tuple[TurnEvent, ...]:
        """A cancelled turn ends ``cancelled`` and re-raises; unless the node running it
        detached asked for the cancel (a stop, a shutdown): it then ends as asked and
        still yields its last events (``_stopping``)."""
        keeper.leave()
        ending = None
        if isinstance(exc, asyncio.CancelledError):
            ending = self.engine.endings.pop(run.lease.turn_id, None)
            if ending is None and keeper.took_stop():  # ``TurnEngine.stop`` of this turn
                ending = Trigger.STOPPED
        if ending is None:  # the consumer went away: nobody to tell
            await self._cancel(run, keeper)
            raise exc
        return await end_on_request(run, ending, cancel=lambda: self._cancel(run, keeper),
                                    record=lambda abort: record_abort(keeper, abort))

    def _act(self, run: TurnRun, keeper: LeaseKeeper) -> Action:
        """The current state's action, once the lease is checked (not before recording an
        abort: a turn that lost its lease still records how it ended): its steps as a
        generator, or, when the action made them all at once (a continuation decided
        without degrading, a commit the store finished without suspending), its events
        and its trigger: no generator to start, resume and close (issue 26)."""
        state = run.current
        if state is State.ABORT:
            return self._abort(run, keeper)
        keeper.check()
        if state is State.VALIDATE:
            return self.steps.validate(run)
        if state in CALL_STATES:
            return self.steps.call(run)
        if state is State.TOOL_ITERATION:
            return self.steps.tools(run)
        return self._persist(run, keeper)

    def _caught(self, run: TurnRun, keeper: LeaseKeeper, exc: BaseException) -> Fire:
        """The trigger for what left the current state's action: a cancel (the keeper's
        interrupt is ``lease_lost``, any other goes on), or a failure; an exit of the
        turn's own (``GeneratorExit``, ``KeyboardInterrupt``) goes on to the drive loop's
        handlers unchanged."""
        if isinstance(exc, asyncio.CancelledError):
            return _interrupted(run, keeper, exc)
        if isinstance(exc, Exception):
            return self._failure(run, keeper, exc)
        raise exc

    def _failure(self, run: TurnRun, keeper: LeaseKeeper, exc: Exception) -> Fire:
        """The trigger for an exception out of the current state's action."""
        if isinstance(exc, CommitConflict):  # a fenced write refused: the chat is not ours
            keeper.lost = keeper.lost or storable_text(str(exc))
            return lease_lost(run, keeper)
        if isinstance(exc, TurnDeadlineExceeded):  # ``keeper.check`` / ``reenter``
            return past_deadline(run, str(exc))
        if run.current is State.ABORT:  # recording the abort failed beyond its retries
            logger.error("turn %s: the abort could not be recorded", run.lease.turn_id,
                         exc_info=exc)
            return FIRED[Trigger.ABORT_RECORDED]
        run.abort_detail = storable_text(str(exc)) or type(exc).__name__
        if isinstance(exc, StorageError):
            logger.warning("turn %s: the store failed in state %s: %s", run.lease.turn_id,
                           run.current, run.abort_detail)
            return Fire(Trigger.STORAGE_FAILED, type(exc).__name__)
        logger.error("turn %s failed in state %s", run.lease.turn_id, run.current,
                     exc_info=exc)
        run.abort_detail = internal_detail(exc)
        return Fire(Trigger.INTERNAL_ERROR, Trigger.INTERNAL_ERROR.value)

    @staticmethod
    def _fire(run: TurnRun, fire: Fire) -> StateChanged:
        source, trigger, reason = run.current, fire.trigger, fire.reason
        dest = run.machine_model.fire(trigger, reason)
        if source is State.VALIDATE and dest in CALL_STATES:
            run.strategy = STRATEGY_OF[dest]
        elif source is State.CURSOR and dest is State.REPLAY:
            run.strategy = Strategy.REPLAY
            run.update_facts(replay_retry_used=True)
        elif trigger is Trigger.CONTEXT_REFUSED:
            run.update_facts(retrims_done=run.facts.retrims_done + 1)
        if dest is State.ABORT:
            run.abort_detail = storable_text(run.abort_detail or reason or trigger.value)
        step = run.machine_model.path[-1]  # the edge just taken, as plain strings
        return state_changed(step.source, step.trigger, step.dest, reason)

    # -- 5. the commit -----------------------------------------------------------------

    def _persist(self, run: TurnRun, keeper: LeaseKeeper) -> Action:
        snapshot = run.snapshot(self.engine.registry)
        # Eagerly: a store that commits without suspending (memory, SQLite's inline
        # path) costs no task and no loop iteration; one that suspends is a task.
        task = run.commit_task = eager_future(
            self.store.commit_turn(run.lease, run.commit_record(snapshot)))
        if task.done() and not task.cancelled() and task.exception() is None:
            return (self._committed(run, snapshot),  # landed: nothing to wait for
                    FIRED[Trigger.COMMITTED])
        return self._settling(run, keeper, snapshot)

    async def _settling(self, run: TurnRun, keeper: LeaseKeeper,
                        snapshot: ContextSnapshot) -> AsyncGenerator[Step, None]:
        """A commit still in flight, or refused: its outcome, waited for."""
        failure = await commit_outcome(run, keeper, lambda until: patiently(
            keeper, lambda: self.store.commit_turn(run.lease, run.commit_record(snapshot)),
            "its commit", until))
        if failure is not None:
            yield failure
            return
        for event in self._committed(run, snapshot):
            yield event
        yield FIRED[Trigger.COMMITTED]

    @staticmethod
    def _committed(run: TurnRun, snapshot: ContextSnapshot) -> tuple[TurnEvent, ...]:
        """The events of a commit that landed."""
        task = run.commit_task
        if run.persisted is not None and task is not None and task.exception() is None:
            # The chat's next turn reads this envelope from the row the commit returned
            # (not when the commit's outcome was read back): it needs no decoding.
            remember_envelope(task.result().last_provider_state, run.persisted)
        if run.degradation and run.state is not None and run.state.mode.durable:
            logger.info("[continuation][recovered] chat=%s turn=%s reason=%s cursor=%s",
                        run.lease.chat_id, run.lease.turn_id, run.degradation, run.state.cursor)
        return (_snapshot_event(snapshot),)

    # -- 6. the exits ------------------------------------------------------------------

    async def _abort(self, run: TurnRun, keeper: LeaseKeeper) -> AsyncGenerator[Step, None]:
        await record_abort(keeper, run.abort_record(abort_reason(run)))
        yield FIRED[Trigger.ABORT_RECORDED]

    async def _cancel(self, run: TurnRun, keeper: LeaseKeeper) -> None:
        """Finish a cancelled turn without yielding: fire ``cancelled``, record the abort."""
        if run.current in FINAL_STATES:
            return
        if run.current is State.PERSIST and run.commit_task is not None:
            # The commit is shielded and may still land: its outcome decides the turn.
            failure = await commit_outcome(run, keeper)
            if failure is None:
                run.machine_model.fire(Trigger.COMMITTED)
                return
            self._fire(run, failure)
        elif run.current is not State.ABORT:
            run.abort_detail = "the turn was cancelled"
            run.machine_model.fire(Trigger.CANCELLED, Trigger.CANCELLED.value)
        await record_abort(keeper, run.abort_record(abort_reason(run)))
        run.machine_model.fire(Trigger.ABORT_RECORDED)


async def _taken(keeper: LeaseKeeper, step: Fire | Transition, outcome: Fire | None
                 ) -> Fire | None:
    """The action's trigger so far, once ``step`` is taken: a ``Fire`` is the trigger; a
    ``Transition`` is a degradation's write, made here."""
    if isinstance(step, Fire):
        return step
    await record_transition(keeper, step)
    return outcome


def _interrupted(run: TurnRun, keeper: LeaseKeeper, exc: asyncio.CancelledError) -> Fire:
    """A cancel out of the action: the keeper's interrupt is ``lease_lost``; any other
    cancel goes on."""
    if keeper.took_deadline():
        return past_deadline(run, str(TurnDeadlineExceeded(keeper.seconds, "in flight")))
    if not keeper.took_interrupt():
        raise exc
    return lease_lost(run, keeper)


async def _paused(run: TurnRun, keeper: LeaseKeeper, delay: float) -> Fire | None:
    """Wait ``delay`` before the action runs again (None); a lease lost or the
    turn's deadline passed meanwhile interrupts the wait: its trigger."""
    try:
        await asyncio.sleep(delay)
    except asyncio.CancelledError as exc:
        return _interrupted(run, keeper, exc)  # any other cancel goes on
    return None


def _settled(run: TurnRun, keeper: LeaseKeeper, outcome: Fire | None) -> Fire:
    """The trigger a state's action ended with, once the turn's code left it: a lease
    lost by an interrupt the action swallowed wins."""
    keeper.leave()
    if keeper.took_interrupt():
        return lease_lost(run, keeper)
    if keeper.took_deadline():  # the action swallowed it: the deadline still ends the turn
        return past_deadline(run, str(TurnDeadlineExceeded(keeper.seconds, "in flight")))
    if outcome is None:  # pragma: no cover - every action ends with a trigger
        msg = f"state {run.current} produced no trigger"
        raise RuntimeError(msg)
    return outcome


def past_deadline(run: TurnRun, detail: str) -> Fire:
    """The turn ran past its deadline: ``deadline_exceeded``, ``detail`` saying where."""
    run.abort_detail = detail
    return _PAST_DEADLINE


_PAST_DEADLINE = Fire(Trigger.DEADLINE_EXCEEDED, Trigger.DEADLINE_EXCEEDED.value)


async def _closed(action: Action | None) -> None:
    """Close an action's generator left at a step (an exception, a cancel or an exit
    at an event): one that ran to its end needs no closing."""
    if action is not None and not isinstance(action, tuple):
        await action.aclose()
