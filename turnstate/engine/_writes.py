"""The turn's own writes and how each one is settled: the mechanics behind ``_lifecycle``.

``_lifecycle`` decides when a turn commits, aborts or ends; this module holds how those
writes are made and what is reported when one of them fails:

* ``commit_outcome``: wait for the (shielded) commit. A refusal is ``commit_conflict``
  (``lease_lost`` when the lease is gone) or ``commit_failed``; a commit whose reply was
  lost is settled by reading the turn back (``landed``), and sent again when it did not
  land (a database away for a moment).
* ``record_transition``: a degradation's write, made exactly once. A write whose reply
  was lost is read back (the turn's in-progress answer, by its id) and sent again only
  when it did not land: a blind retry would append the part twice.
* ``record_abort``: the abort, with a storable detail, retried with backoff while the
  lease lasts, and without its parts if the store refuses them; an attempt that does
  not finish while the lease lasts (at least ``ABORT_GRACE_SECONDS``) goes on in the
  background, and the turn ends without waiting for it.
* ``unstarted_abort`` / ``unstarted_events``: what a turn that failed between its lease
  and its machine records and reports; ``unanswered_lease``: the lease a begin whose
  reply was lost took, read back so that it can be released.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Collection
from typing import Any, TypeVar

import attrs

from turnstate.core._conversation import MessageStatus, TransitionPart
from turnstate.core._errors import CommitConflict, LeaseLost, PersistenceRefused, StorageError
from turnstate.core._errors_storage import STORAGE_OUTAGES
from turnstate.core._events import StateChanged, TurnAborted, TurnEvent, TurnStats
from turnstate.core._path import PathStep
from turnstate.engine._lease import RETRY_FIRST, LeaseKeeper
from turnstate.engine._patience import budget
from turnstate.engine._run import TurnRun
from turnstate.engine._step_values import Fire, Transition
from turnstate.providers._scrub import storable_text
from turnstate.states._table import State, Trigger
from turnstate.storage._protocol import ChatRecord, Store, TurnAbort, TurnLease, TurnStatus

logger = logging.getLogger("turnstate")

ABORT_GRACE_SECONDS = 1.0
"""How long the turn waits for an abort write once its lease has run out or was lost:
the write goes on in the background, but the turn's end (its final event, a shutdown)
does not wait for the store's own timeouts (10 s and more) on a silent database."""
_WRITING: set[asyncio.Future[Any]] = set()  # writes the turn no longer waits for

T = TypeVar("T")


def lease_lost(run: TurnRun, keeper: LeaseKeeper) -> Fire:
    """The trigger for a turn that no longer holds its chat."""
    run.update_facts(lease_held=False)
    run.abort_detail = keeper.lost or "the turn lost its lease"
    return Fire(Trigger.LEASE_LOST, Trigger.LEASE_LOST.value)


# -- the commit ------------------------------------------------------------------------

COMMIT_WRITES = 3
"""How often a commit is sent at most: again only once a read showed that the previous
one did not land (the database was away for a moment: a restart, a failover)."""


async def commit_outcome(run: TurnRun, keeper: LeaseKeeper,
                         resend: Callable[[float], Awaitable[ChatRecord]] | None = None
                         ) -> Fire | None:
    """Wait for the (shielded) commit: None when it landed, else the abort trigger.

    A commit that failed without an answer is read back: landed, the turn is done; still
    running, the commit is sent again (``resend``, at most ``COMMIT_WRITES`` sends in all)
    while the lease lasts, so a database away for a few seconds does not drop the answer.
    Every send is given the same budget, fixed at the first failure (``_patience.budget``):
    a heartbeat renewing meanwhile must not give each send a lease of its own (three
    sends of a store refusing writes held the turn for two leases).
    A refusal after such a resend is read back too: an earlier send may have landed late.
    """
    sends, until = 1, None
    while True:
        assert run.commit_task is not None
        try:
            await asyncio.shield(run.commit_task)
        except asyncio.CancelledError:  # the turn leaves the wait: the commit goes on
            _left(run.commit_task)
            raise
        except CommitConflict as exc:
            if sends > 1 and await landed(keeper):
                return None
            run.abort_detail = storable_text(str(exc))
            if isinstance(exc, LeaseLost) or not await keeper.still_held():
                return lease_lost(run, keeper)
            return Fire(Trigger.COMMIT_CONFLICT, None)
        except PersistenceRefused as exc:
            if sends > 1 and await landed(keeper):
                return None
            run.abort_detail = storable_text(str(exc))
            return Fire(Trigger.COMMIT_FAILED, type(exc).__name__)
        except Exception as exc:  # the reply is lost, or the store failed: what landed?
            until = budget(keeper) if until is None else until
            status = await stored_status(keeper)
            if status is TurnStatus.COMPLETED:
                return None
            if (status is TurnStatus.IN_PROGRESS and resend is not None
                    and sends < COMMIT_WRITES and keeper.lost is None):
                logger.warning("turn %s: its commit did not land (%s); sending it again",
                               keeper.lease.turn_id, type(exc).__name__)
                sends += 1
                run.commit_task = asyncio.ensure_future(resend(until))
                continue
            run.abort_detail = storable_text(str(exc)) or type(exc).__name__
            return Fire(Trigger.COMMIT_FAILED, type(exc).__name__)
        return None


async def landed(keeper: LeaseKeeper) -> bool:
    """Whether the turn's commit landed, read back from the store while the lease lasts
    (a commit whose reply was lost may have been written whole)."""
    return await stored_status(keeper) is TurnStatus.COMPLETED


async def stored_status(keeper: LeaseKeeper) -> TurnStatus | None:
    """The turn's status in the store, read back while the lease lasts (None: unknown)."""
    record = await read_back(keeper, lambda: keeper.store.load_turn(keeper.lease.turn_id))
    return None if record is None else record.status


async def read_back(keeper: LeaseKeeper, read: Callable[[], Awaitable[T]]) -> T | None:
    """``read()``, retried with backoff until the lease as it stands now runs out; None
    when no attempt succeeded. The budget is fixed when the reading starts: a heartbeat
    that keeps renewing must not keep a store whose reads fail spinning for ever."""
    loop, until, delay = asyncio.get_running_loop(), keeper.deadline, RETRY_FIRST
    while True:
        try:
            return await read()
        except Exception:
            if until - loop.time() <= delay:
                return None
        await asyncio.sleep(delay)
        delay = min(delay * 2, 1.0)


# -- a degradation ---------------------------------------------------------------------

TRANSITION_WRITES = 3
"""How often a degradation's write is sent at most (again only once a read showed that
the previous one did not land)."""

_REFUSED = (CommitConflict, PersistenceRefused, LookupError)  # an answer, not a lost reply


async def record_transition(keeper: LeaseKeeper, write: Transition) -> None:
    """Append a degradation's transition part to the turn's answer, exactly once.

    A refusal (a fenced write, a missing chat) is raised at once. Any other failure may
    have lost the reply of a write that landed: the answer is read back (``read_back``)
    and, when it holds the part, the turn carries on; when it does not, the write is sent
    again. The error is raised when the read finds nothing within the lease, or after
    ``TRANSITION_WRITES`` writes that did not land (the turn ends ``storage_failed``).
    """
    lease, store = keeper.lease, keeper.store
    for attempt in range(1, TRANSITION_WRITES + 1):
        try:
            await store.record_transition(
                lease, write.part, clear_provider_state=write.clear_provider_state)
            return
        except _REFUSED:
            raise
        except Exception as exc:
            stored = await read_back(keeper, lambda: transitions_stored(store, lease))
            if stored is not None and stored >= write.count:
                logger.warning("turn %s: the reply to its degradation write was lost (%s); "
                               "the write landed", lease.turn_id, type(exc).__name__)
                return
            if stored is None or attempt == TRANSITION_WRITES:
                raise
            logger.warning("turn %s: its degradation write did not land (%s); sending it "
                           "again", lease.turn_id, type(exc).__name__)
    msg = "unreachable: the last attempt always returns or raises"
    raise AssertionError(msg)  # pragma: no cover


async def transitions_stored(store: Store, lease: TurnLease) -> int:
    """How many transition parts the turn's in-progress answer holds in ``store`` (0
    once it is no longer in progress: a write sent again is then refused, as it should)."""
    for message in await store.list_messages(lease.chat_id):
        if message.id == lease.assistant_message_id:
            if message.status is not MessageStatus.IN_PROGRESS:
                return 0
            return sum(isinstance(part, TransitionPart) for part in message.parts)
    return 0


# -- the abort -------------------------------------------------------------------------

async def record_abort(keeper: LeaseKeeper, abort: TurnAbort) -> None:
    """Record ``abort`` (shielded, so a second cancel cannot cut a write in flight).

    The detail is made storable first. A failed write is retried with backoff while the
    lease lasts: with the turn's parts while the store is away (``STORAGE_OUTAGES``: the
    streamed text is what a stopped answer keeps), without them once the store refused
    them (any other error); after that the failure is logged and the short lease frees
    the chat.
    """
    abort = attrs.evolve(abort, detail=None if abort.detail is None
                         else storable_text(abort.detail))
    lease, delay = keeper.lease, RETRY_FIRST
    while True:
        write = asyncio.ensure_future(keeper.store.abort_turn(lease, abort))
        write.set_name(f"abort {lease.turn_id}")  # ``abort_writes`` finds it by that
        try:
            await asyncio.wait_for(asyncio.shield(write),
                                   max(keeper.remaining(), ABORT_GRACE_SECONDS))
            return
        except TimeoutError:
            if write.done():  # the store's own timeout, as any failure: not retried here
                write.exception()
            else:
                _WRITING.add(write)
                write.add_done_callback(_written)
            logger.error("recording the abort of turn %s did not finish within its lease; "
                         "it goes on in the background (the lease frees the chat when it "
                         "runs out)", lease.turn_id)
            return
        except asyncio.CancelledError:  # the turn given up (a shutdown past its grace):
            _WRITING.add(write)  # the shielded write goes on, its outcome still read
            write.add_done_callback(_abandoned)
            raise
        except STORAGE_OUTAGES as exc:  # the store away: the same write again, parts and all
            if keeper.remaining() <= delay:
                logger.error("could not record the abort of turn %s (%s); its lease "
                             "frees the chat when it runs out", lease.turn_id, exc)
                return
        except Exception as exc:
            if abort.parts:  # the store refused the parts: the outcome matters more
                logger.warning("recording the abort of turn %s with its parts failed "
                               "(%s); recording it without them", lease.turn_id, exc)
                abort = attrs.evolve(abort, parts=())
                continue
            if keeper.remaining() <= delay:
                logger.error("could not record the abort of turn %s (%s); its lease "
                             "frees the chat when it runs out", lease.turn_id, exc)
                return
        await asyncio.sleep(delay)
        delay = min(delay * 2, 1.0)


def abort_writes(turn_ids: Collection[str]) -> list[asyncio.Task[None]]:
    """The abort writes of ``turn_ids`` still going on that no turn waits for any more
    (a shutdown past its grace cuts them: they would run on until the store's own
    timeouts, the pool's acquire timeout or the statement's)."""
    names = {f"abort {turn_id}" for turn_id in turn_ids}
    return [write for write in _WRITING if isinstance(write, asyncio.Task)
            and write.get_name() in names and not write.done()]


def _written(write: asyncio.Task[None]) -> None:
    """An abort write the turn stopped waiting for has ended: let go, its outcome read."""
    _WRITING.discard(write)
    if not write.cancelled() and write.exception() is not None:
        logger.error("the late abort write of a turn failed: %s", write.exception())


def _left(commit: asyncio.Future[ChatRecord]) -> None:
    """A commit whose turn stopped waiting for it (cancelled, maybe twice: the turn's
    ending records its abort meanwhile): it finishes alone, among the writes no turn
    waits for, and its outcome is read when it ends (a refusal, the lease being gone,
    is no news), never reported by the loop as an exception nobody retrieved."""
    if not commit.done() and commit not in _WRITING:
        _WRITING.add(commit)
        commit.add_done_callback(_commit_left)


def _commit_left(commit: asyncio.Future[ChatRecord]) -> None:
    _WRITING.discard(commit)
    if not commit.cancelled() and commit.exception() is not None:
        logger.info("a commit its turn left did not land: %s", commit.exception())


def _abandoned(write: asyncio.Task[None]) -> None:
    """An abort write whose turn was cancelled while it waited: its failure is no news
    (whoever cancelled said what was left unwritten), read and told at info."""
    _WRITING.discard(write)
    if not write.cancelled() and write.exception() is not None:
        logger.info("an abandoned abort write failed: %s", write.exception())


def interrupted_abort(run: TurnRun) -> TurnAbort:
    """The abort of a turn whose ending was itself interrupted (a second cancel while
    its abort was written): ``cancelled``, with what its answered requests billed. The
    interrupted write goes on and races this one (whichever lands first is kept: an
    abort marks only what is still in progress), so each carries the bill: a bare one
    landing first dropped it, the answer neither billed nor marked unknown."""
    usage, audit = run.billed_record()
    return TurnAbort(reason=Trigger.CANCELLED.value, path=tuple(run.machine_model.path),
                     detail="the turn was interrupted while it ended", usage=usage,
                     audit=audit)


def abort_reason(run: TurnRun) -> str:
    """The reason an abort records: the trigger that led into ``abort``."""
    step = run.machine_model.path[-1] if run.machine_model.path else None
    return step.trigger if step is not None else Trigger.CANCELLED.value


def _gone(exc: BaseException) -> bool:
    return isinstance(exc, asyncio.CancelledError | GeneratorExit)


def internal_detail(exc: BaseException) -> str:
    """A short description of an unexpected exception (its type and first words)."""
    if _gone(exc):
        return "the turn was cancelled"
    text, name = storable_text(str(exc)), type(exc).__name__
    return f"internal error: {name}: {text}" if text else f"internal error: {name}"


# -- a turn that never started ---------------------------------------------------------

def unstarted_abort(exc: BaseException) -> TurnAbort:
    """What to record for a turn that failed between ``begin_turn`` and its machine."""
    if _gone(exc):
        reason, detail = Trigger.CANCELLED, "the turn was cancelled"
    elif isinstance(exc, StorageError):
        reason, detail = Trigger.STORAGE_FAILED, storable_text(str(exc))
    else:
        reason, detail = Trigger.INTERNAL_ERROR, internal_detail(exc)
    path = (
        PathStep(source=State.VALIDATE.value, trigger=reason.value, dest=State.ABORT.value,
                 reason=reason.value),
        PathStep(source=State.ABORT.value, trigger=Trigger.ABORT_RECORDED.value,
                 dest=State.ABORTED.value),
    )
    return TurnAbort(reason=reason.value, path=path, detail=detail)


async def unanswered_lease(store: Store, chat_id: str, turn_id: str) -> TurnLease | None:
    """The lease a begin whose reply was lost took, read back: None when the store does
    not hold ``turn_id`` as a running turn of ``chat_id``, or cannot say now (its lease
    then frees the chat). Only what an abort writes by is filled in: the chat, the turn,
    its messages' ids and seqs (the epoch and version are no part of an abort)."""
    try:
        record = await store.load_turn(turn_id)
        if record.status is not TurnStatus.IN_PROGRESS or record.chat_id != chat_id:
            return None
        ids = {message.seq: message.id for message in await store.list_messages(chat_id)}
    except Exception:  # unknown (the begin did not land) or the store is still away
        return None
    return TurnLease(chat_id=chat_id, turn_id=turn_id,
                     user_message_id=ids.get(record.user_seq, ""),
                     assistant_message_id=ids.get(record.assistant_seq, ""),
                     user_seq=record.user_seq, assistant_seq=record.assistant_seq,
                     base_version=0, expires_at=record.started_at)


def unstarted_events(lease: TurnLease, abort: TurnAbort) -> tuple[TurnEvent, ...]:
    """The events of such a turn: its two state changes, then ``turn_aborted``."""
    changes = tuple(StateChanged(source=s.source, trigger=s.trigger, dest=s.dest,
                                 reason=s.reason) for s in abort.path)
    final = TurnAborted(turn_id=lease.turn_id, chat_id=lease.chat_id, reason=abort.reason,
                        detail=abort.detail, strategy=None, degradation=None,
                        path=abort.path, stats=TurnStats())
    return (*changes, final)
