"""The server's shutdown, bounded: what a turn could not write in time is said, not waited for.

A shutdown ends every turn running here ``cancelled``: each records its abort, its last
events go to the turn log, and its streams send the final event. While the database is
away each of those writes waits for the store's own bounds (a turn's abort while its
lease lasts, 30 s; an event-log write for the statement's 35 s, retried for 10 s more),
and a shutdown that waited for all of them outlasted an orchestrator's grace period
(Kubernetes sends SIGKILL 30 s after SIGTERM) and lost what it was still writing anyway.

``serve --shutdown-grace SECONDS`` (default ``DEFAULT_SHUTDOWN_GRACE``) bounds the whole
shutdown; ``ShutdownBudget`` splits it between the turns (``ServerConfig.
shutdown_seconds``: ending them, their writes, their streams' last events), the
connections (aiohttp's ``shutdown_timeout``: requests still being answered) and closing
the store, the transport and the emulators. Past the turns' share ``end_turns`` logs one
line per turn whose end or events were not written (``outcome=unwritten``, the reason
``abort_not_recorded`` or ``events_not_logged``) and stops waiting; ``finish_by`` cuts a
close that outlasts its deadline.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from typing import TypeVar

import attrs

from turnstate.engine._detached import DetachedTurns
from turnstate.engine._live import LiveTurn
from turnstate.engine._writes import abort_writes

logger = logging.getLogger("turnstate")

T = TypeVar("T")

DEFAULT_SHUTDOWN_GRACE = 25.0
"""Seconds ``serve``'s whole shutdown may take: within Kubernetes' default 30 s
``terminationGracePeriodSeconds`` with 5 s to spare (the process's exit, a preStop)."""
STREAMS_GRACE_SECONDS = 2.0
"""How long the shutdown lets open streams send their final events before it cuts them
(within the turns' share)."""
_CUT_TRIES = 20
_CUT_STEP_SECONDS = 0.05


@attrs.frozen
class ShutdownBudget:
    """A grace split in three, in the order the shutdown spends it: ``turns``, then
    ``connections``, then ``close`` (each at most its share: a phase that ends early
    leaves its rest to the next, as each phase's deadline counts from the start)."""

    grace: float

    @property
    def close(self) -> float:
        """Closing the store, the transport and the emulators."""
        return min(5.0, 0.15 * self.grace)

    @property
    def connections(self) -> float:
        """aiohttp's wait for requests still being answered, once the turns ended."""
        return min(10.0, 0.15 * self.grace)

    @property
    def turns(self) -> float:
        """Ending the turns, writing their ends and letting their streams send them."""
        return self.grace - self.close - self.connections


async def end_turns(detached: DetachedTurns, seconds: float) -> int:
    """``detached.close()`` within ``seconds``; past them, one line per turn whose end or
    events were not written, and the turns abandoned. Returns the turns cancelled."""
    running = sum(not live.done for live in detached.live.values())
    closing = asyncio.ensure_future(detached.close())
    done, _ = await asyncio.wait({closing}, timeout=seconds)  # never cancels the turns
    if done:
        return closing.result()
    given_up = list(detached.live.values())
    for live in given_up:
        _say_unwritten(live, seconds)
    detached.abandon()
    await _cut([live.task for live in given_up if live.task is not None])
    detached.abandon()  # the log writer their last events started again
    # Their abort writes, shielded, went on without them: cut too, or they hold the loop
    # (and the pool's connections) until the store's own timeouts, 10 s and more.
    await _cut(abort_writes([live.turn_id for live in given_up]))
    closing.cancel()
    return running


async def _cut(tasks: list[asyncio.Task[None]]) -> None:
    """Cancel ``tasks`` (the turns' runners, then their abort writes) until they end,
    ``_CUT_TRIES`` times at most, ``_CUT_STEP_SECONDS`` apart: a turn's runner takes a
    cancel as the turn's end and goes on (its interrupted end records the abort again,
    then it reads the turn's record), so each of those waits on the silent store is cut
    in turn; their outcomes are read here, not left to the loop's exception handler."""
    for _ in range(_CUT_TRIES):
        pending = [task for task in tasks if not task.done()]
        if not pending:
            break
        for task in pending:
            task.cancel()
        await asyncio.wait(pending, timeout=_CUT_STEP_SECONDS)
    for task in tasks:
        if task.done() and not task.cancelled():
            task.exception()


def _say_unwritten(live: LiveTurn, seconds: float) -> None:
    extra = {"turn_id": live.turn_id, "chat_id": live.chat_id, "owner": live.owner,
             "outcome": "unwritten"}
    if live.task is not None and not live.task.done():
        logger.error("[shutdown] turn %s: its end was not recorded within the shutdown's "
                     "%g s (the store did not answer); its lease frees the chat when it "
                     "runs out, and a sweep then ends it lease_expired", live.turn_id,
                     seconds, extra={**extra, "reason": "abort_not_recorded"})
    elif not live.logged.is_set():
        logger.error("[shutdown] turn %s: events %d-%d were not written to its turn log "
                     "within the shutdown's %g s; a stream resuming it gets its end from "
                     "the stored turn", live.turn_id, live.logged_through + 1, live.last_id,
                     seconds, extra={**extra, "reason": "events_not_logged"})


async def finish_by(work: Awaitable[T], deadline: float, what: str) -> T | None:
    """``work`` until the loop's time ``deadline``; then it is cancelled (again, a few
    times, should it wait in its own cleanup: asyncpg's pool closes gracefully until a
    cancel makes it terminate its connections) and None returned, with one line said."""
    task = asyncio.ensure_future(work)
    loop = asyncio.get_running_loop()
    done, _ = await asyncio.wait({task}, timeout=max(0.0, deadline - loop.time()))
    if not done:
        logger.error("[shutdown] %s did not finish within the shutdown grace: cut", what)
        for _ in range(_CUT_TRIES):
            task.cancel()
            done, _ = await asyncio.wait({task}, timeout=_CUT_STEP_SECONDS)
            if done:
                break
        else:
            logger.error("[shutdown] %s ignored its cancellation: left running", what)
            return None
    if task.cancelled():
        return None
    return task.result()
