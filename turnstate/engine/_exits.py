"""How a turn that holds its chat's lease ends when it cannot end normally.

From the moment ``begin_turn`` succeeds, the chat is leased to the turn; every way out
(an exception, a cancellation, ``aclose()`` at any event, a dropped iterator closed by
the event loop's async-generator finalizer) must record the turn ``aborted`` and release
the lease before the call returns. The reason is ``cancelled`` when the consumer or the
task went away and ``internal_error`` for a bug or an unexpected exception. A turn that
failed before its machine started records the two-step path ``validate → abort →
aborted``. Every store write here is shielded, so a second cancellation cannot cut it.
"""

from __future__ import annotations

import asyncio
import logging

import attrs

from turnstate.core._errors import CommitConflict
from turnstate.core._events import StateChanged, TurnAborted, TurnEvent, TurnStats
from turnstate.core._path import PathStep
from turnstate.engine._run import TurnRun
from turnstate.providers._scrub import scrub_text
from turnstate.states._table import FINAL_STATES, State, Trigger
from turnstate.storage._protocol import Store, TurnAbort, TurnLease

logger = logging.getLogger("turnstate")

_MAX_DETAIL = 500


@attrs.frozen
class Fire:
    """An action's outcome: the trigger to fire next, with its reason code."""

    trigger: Trigger
    reason: str | None = None


def _gone(exc: BaseException) -> bool:
    return isinstance(exc, asyncio.CancelledError | GeneratorExit)


def short_detail(exc: BaseException) -> str:
    """An exception's text fit for events and the store: scrubbed and bounded."""
    text = scrub_text(str(exc))
    return text[:_MAX_DETAIL] + "..." if len(text) > _MAX_DETAIL else text


def internal_detail(exc: BaseException) -> str:
    """A short description of an unexpected exception (its type and first words)."""
    if _gone(exc):
        return "the turn was cancelled"
    text = short_detail(exc)
    name = type(exc).__name__
    return f"internal error: {name}: {text}" if text else f"internal error: {name}"


def unstarted_abort(exc: BaseException) -> TurnAbort:
    """What to record for a turn that failed between ``begin_turn`` and its machine."""
    reason = Trigger.CANCELLED if _gone(exc) else Trigger.INTERNAL_ERROR
    path = (
        PathStep(source=State.VALIDATE.value, trigger=reason.value, dest=State.ABORT.value,
                 reason=reason.value),
        PathStep(source=State.ABORT.value, trigger=Trigger.ABORT_RECORDED.value,
                 dest=State.ABORTED.value),
    )
    return TurnAbort(reason=reason.value, path=path, detail=internal_detail(exc))


def unstarted_events(lease: TurnLease, abort: TurnAbort) -> tuple[TurnEvent, ...]:
    """The events of such a turn: its two state changes, then ``turn_aborted``."""
    changes = tuple(StateChanged(source=s.source, trigger=s.trigger, dest=s.dest,
                                 reason=s.reason) for s in abort.path)
    final = TurnAborted(turn_id=lease.turn_id, chat_id=lease.chat_id, reason=abort.reason,
                        detail=abort.detail, strategy=None, degradation=None,
                        path=abort.path, stats=TurnStats())
    return (*changes, final)


async def release(store: Store, lease: TurnLease, abort: TurnAbort,
                  exc: BaseException | None = None) -> None:
    """Record ``abort`` (shielded); a failure is logged and the lease left to expire."""
    if exc is not None and not _gone(exc):
        logger.error("turn %s failed before it started", lease.turn_id, exc_info=exc)
    try:
        await asyncio.shield(store.abort_turn(lease, abort))
    except Exception:
        logger.exception("could not record the abort of turn %s; its lease will expire",
                         lease.turn_id)


async def record_abort(store: Store, run: TurnRun) -> None:
    """Record the running turn's abort; without its parts if the store refuses them."""
    step = run.machine_model.path[-1] if run.machine_model.path else None
    reason = step.trigger if step is not None else Trigger.CANCELLED.value
    try:
        await asyncio.shield(store.abort_turn(run.lease, run.abort_record(reason)))
    except Exception:
        logger.exception("could not record the abort of turn %s in full", run.lease.turn_id)
        await release(store, run.lease, attrs.evolve(run.abort_record(reason), parts=()))


async def commit_outcome(run: TurnRun) -> Fire | None:
    """Wait for the turn's (shielded) commit; None when it landed, else the abort trigger."""
    assert run.commit_task is not None
    try:
        await asyncio.shield(run.commit_task)
    except CommitConflict as exc:
        run.abort_detail = short_detail(exc)
        return Fire(Trigger.COMMIT_CONFLICT, None)
    except Exception as exc:  # a StorageError, or a store that broke its contract
        run.abort_detail = short_detail(exc)
        return Fire(Trigger.COMMIT_FAILED, type(exc).__name__)
    return None


async def cancel(store: Store, run: TurnRun) -> None:
    """Finish a cancelled turn without yielding: fire ``cancelled``, record the abort."""
    if run.current in FINAL_STATES:
        return
    if run.current is State.PERSIST and run.commit_task is not None:
        # The commit is shielded and may still land: its outcome decides the turn.
        failure = await commit_outcome(run)
        if failure is None:
            run.machine_model.fire(Trigger.COMMITTED)
            return
        run.machine_model.fire(failure.trigger, failure.reason)
    elif run.current is not State.ABORT:
        run.machine_model.fire(Trigger.CANCELLED, Trigger.CANCELLED.value)
        run.abort_detail = "the turn was cancelled"
    await record_abort(store, run)
    run.machine_model.fire(Trigger.ABORT_RECORDED)


async def internal_error(store: Store, run: TurnRun, exc: Exception) -> Fire:
    """The trigger after an unexpected exception in the current state's action."""
    logger.error("turn %s failed in state %s", run.lease.turn_id, run.current, exc_info=exc)
    if run.current is State.ABORT:  # recording the abort itself failed
        await release(store, run.lease, attrs.evolve(
            run.abort_record(Trigger.INTERNAL_ERROR.value), parts=(),
            detail=internal_detail(exc)))
        return Fire(Trigger.ABORT_RECORDED, None)
    if run.current is State.PERSIST and run.commit_task is not None:
        # The commit was sent: its outcome decides the turn, not what failed after it.
        return await commit_outcome(run) or Fire(Trigger.COMMITTED, None)
    run.abort_detail = internal_detail(exc)
    return Fire(Trigger.INTERNAL_ERROR, Trigger.INTERNAL_ERROR.value)
