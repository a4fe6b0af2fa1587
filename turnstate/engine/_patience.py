"""A turn's store calls ride out a short outage (lifecycle11): a database restart of a few
seconds must not lose a turn, nor the answer the provider was paid for.

A store call a running turn makes (its history and media reads, the read of its chat
after the begin, its commit's sends) that fails with a transient error (``STORAGE_OUTAGES``:
the database unreachable, its pool exhausted, a statement unanswered, contention that
outlasted the store's own retries) is made again with backoff (``RETRY_FIRST``, doubling
to ``MAX_DELAY``) for as long as the turn holds its lease, less ``MARGIN_SHARE`` of the
lease kept for recording the abort should the store not return. Any other error is
raised at once, as is the last transient one once that time is spent or the lease lost.
The lease itself is kept by the heartbeat meanwhile (``_lease``), which retries until the
lease runs out.

``patiently`` is for calls whose repetition is safe: reads, and a commit (fenced by the
lease: a send repeated after one that landed is refused, and that refusal is read back
by ``_writes.commit_outcome``). The drive loop (``_lifecycle``) runs a provider call's
state again when its action failed this way before it sent a request (``again``): the
failed read is then the first thing it makes, and nothing of the action was done yet
(no event out, no request sent, nothing of the run changed but what the read fills).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

import attrs

from turnstate.core._errors_storage import STORAGE_OUTAGES
from turnstate.engine._lease import RETRY_FIRST, LeaseKeeper
from turnstate.engine._run import TurnRun
from turnstate.providers._scrub import storable_text
from turnstate.states._table import CALL_STATES, State

logger = logging.getLogger("turnstate")

T = TypeVar("T")

MARGIN_SHARE = 0.1
"""The share of the lease kept, after the last retry, for recording the turn's abort."""

MAX_DELAY = 1.0
"""The longest pause between two attempts (seconds)."""


def delay_of(attempt: int) -> float:
    """The pause before retry number ``attempt`` (0 for the first)."""
    return min(RETRY_FIRST * float(1 << min(attempt, 16)), MAX_DELAY)


def budget(keeper: LeaseKeeper) -> float:
    """Until when (loop time) a store call that failed now may be made again: the lease
    as it stands now, less the abort's margin. Fixed when the first attempt fails (as
    ``_writes.read_back``'s): a heartbeat that goes on renewing must not keep a call the
    store keeps failing going for ever."""
    return keeper.deadline - keeper.lease_seconds * MARGIN_SHARE


def in_time(keeper: LeaseKeeper, delay: float, until: float) -> bool:
    """Whether a retry after ``delay`` comes before ``until`` (``budget``), the lease
    still held."""
    return keeper.lost is None and asyncio.get_running_loop().time() + delay < until


async def patiently(keeper: LeaseKeeper, call: Callable[[], Awaitable[T]], what: str,
                    until: float | None = None) -> T:
    """``call()``, made again after a transient store error while ``in_time``: until
    ``until`` when given (a budget fixed by an earlier failure of the same write: a
    commit's sends share one), else the ``budget`` as its first failure finds it."""
    attempt = 0
    while True:
        try:
            return await call()
        except STORAGE_OUTAGES as exc:
            if until is None:
                until = budget(keeper)
            delay = delay_of(attempt)
            if not in_time(keeper, delay, until):
                raise
            if attempt == 0:
                logger.warning("turn %s: %s failed (%s); trying again while the lease "
                               "lasts", keeper.lease.turn_id, what, type(exc).__name__)
        attempt += 1
        await asyncio.sleep(delay)


@attrs.frozen
class Rerun:
    """A provider call's action to run again after ``delay``: its ``attempt``-th retry
    (from 0) since it first failed, ``until`` its ``budget``; ``key`` names the action
    (its state, the turn's requests sent before it, its tool iterations done)."""

    key: tuple[State, int, int]
    attempt: int
    until: float
    delay: float


def again(run: TurnRun, keeper: LeaseKeeper, exc: BaseException, requests: int,
          last: Rerun | None) -> Rerun | None:
    """Whether the current provider call's action, ended by ``exc``, runs again: it
    failed on a transient store error (its history or question media read) before it
    sent a request (``requests``: the turn's count when it began), and the lease leaves
    time for it. ``last``: the previous rerun, if any (of the same action: its attempts
    go on, within its budget). None: the failure is the turn's."""
    if not (isinstance(exc, STORAGE_OUTAGES) and run.current in CALL_STATES
            and run.stats.requests == requests):
        return None
    key = (run.current, requests, run.facts.iterations_done)
    if last is not None and last.key == key:
        attempt, until = last.attempt + 1, last.until
    else:  # the action's first failure: its budget is fixed now
        attempt, until = 0, budget(keeper)
    delay = delay_of(attempt)
    if not in_time(keeper, delay, until):
        return None
    if attempt == 0:
        logger.warning("turn %s: the store failed in state %s (%s); trying again while the "
                       "lease lasts", run.lease.turn_id, run.current,
                       storable_text(str(exc)) or type(exc).__name__)
    return Rerun(key=key, attempt=attempt, until=until, delay=delay)
