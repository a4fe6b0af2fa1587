"""A database outage in the log: one line when it starts, one when it ends (lifecycle5).

asyncpg's pool keeps its ``min_size`` connections: when one is lost it reconnects in a
maintenance task and, at every failed attempt (after 1 s, 2 s, 4 s, ... up to 60 s),
logs ``Failed to restore the pool connection floor; retrying`` at WARNING with the
connection error's whole traceback (some 40 lines of asyncpg and asyncio frames): a
minute's outage filled the log with a dozen tracebacks that say the same thing, and
buried the turns' own typed lines.

``quiet_reconnects(pool)`` (every ``PostgresStore`` calls it for its pool) installs, once
per process, a filter on the ``asyncpg.pool`` logger. For a watched pool, a failed
reconnect whose error is the database being unreachable (a refused or reset connection,
a timeout, the server saying it cannot accept connections now) is replaced by one
``turnstate`` WARNING at the outage's first failure, ``[postgres] lost its connection
to the database ...``, and one INFO line when the pool's reconnecting ends (``...
reached the database again after N s``: the pool's first statement answered or its
floor restored, whichever comes first; or the pool closed first). Any other error
(a refused password, a missing database, a bug) and any other pool's records pass
through unchanged, traceback included.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import asyncpg
from asyncpg import pool as asyncpg_pool

logger = logging.getLogger("turnstate")

FLOOR_MESSAGE = "Failed to restore the pool connection floor; retrying"
"""asyncpg's message for a failed reconnect of the pool's connection floor."""

_UNREACHABLE = (OSError, TimeoutError, asyncpg.PostgresConnectionError,
                asyncpg.CannotConnectNowError, asyncpg.InterfaceError)
_GONE_STATES = frozenset({"57P01", "57P02", "57P03"})  # shutdown, crash, cannot connect now


def unreachable(exc: BaseException | None) -> bool:
    """Whether ``exc`` says the database cannot be reached now (an outage), not that
    something is wrong with the request or the setup."""
    if isinstance(exc, asyncpg.PostgresError):
        return getattr(exc, "sqlstate", None) in _GONE_STATES
    return isinstance(exc, _UNREACHABLE)


class _Outage:
    """One pool's outage as logged so far."""

    def __init__(self, started: float) -> None:
        self.started, self.failures = started, 1
        self.task: asyncio.Task[Any] | None = None  # the reconnecting task it watches


class ReconnectFilter(logging.Filter):
    """The ``asyncpg.pool`` filter (see the module docstring)."""

    def __init__(self) -> None:
        super().__init__("turnstate.postgres.reconnects")
        # asyncpg's pools take no weak reference: a closed pool is let go at the next add
        self.pools: list[asyncpg.Pool] = []
        self.outages = OUTAGES

    def filter(self, record: logging.LogRecord) -> bool:
        if record.msg != FLOOR_MESSAGE or not record.exc_info:
            return True
        if not unreachable(record.exc_info[1]):
            return True  # a real error: as asyncpg logs it
        pool = self._reconnecting()
        if pool is None:
            return True  # not a pool of ours
        task = asyncio.current_task()
        outage = self.outages.get(pool)
        if outage is None:
            self.outages[pool] = outage = _Outage(asyncio.get_running_loop().time())
            exc = record.exc_info[1]
            logger.warning("[postgres] lost its connection to the database (%s: %s); "
                           "reconnecting, quietly until it is back", type(exc).__name__,
                           exc)
        else:
            outage.failures += 1
        if task is not None and task is not outage.task:  # its end may be the outage's
            outage.task = task
            task.add_done_callback(lambda _: self._ended(pool))
        return False

    def _reconnecting(self) -> asyncpg.Pool | None:
        """The watched pool whose reconnecting task is running now (the record's)."""
        try:
            task = asyncio.current_task()
        except RuntimeError:  # no running loop: not a pool's task
            return None
        if task is None:
            return None
        for pool in self.pools:
            if getattr(pool, "_maintenance_task", None) is task:
                return pool
        return None

    def _ended(self, pool: asyncpg.Pool) -> None:
        """A reconnecting task ended: the outage too, once the pool has its floor again
        or closed (asyncpg's task also ends when acquirers took over the reconnecting:
        the outage then goes on, and the next failed reconnect's task is watched)."""
        if pool.is_closing() or pool.get_size() >= pool.get_min_size():
            reached(pool, closing=pool.is_closing())


OUTAGES: dict[asyncpg.Pool, _Outage] = {}
"""The watched pools in an outage now (the store tests it after each statement)."""


def reached(pool: asyncpg.Pool, *, closing: bool = False) -> None:
    """``pool`` reached the database again (a statement was answered, or its floor was
    restored): the end of its outage, if it was in one, logged once."""
    outage = OUTAGES.pop(pool, None)
    if outage is None:
        return
    seconds = asyncio.get_running_loop().time() - outage.started
    if closing:
        logger.info("[postgres] the pool closed %.1f s into a database outage (%d "
                    "reconnects failed)", seconds, outage.failures)
    else:
        logger.info("[postgres] reached the database again after %.1f s (%d reconnects "
                    "failed)", seconds, outage.failures)


_FILTER: list[ReconnectFilter] = []  # the process's one filter, installed on first use


def quiet_reconnects(pool: Any) -> None:
    """Log ``pool``'s failed reconnects during an outage as one line at its start and
    one at its end (see the module docstring)."""
    if not _FILTER:
        _FILTER.append(ReconnectFilter())
        # asyncpg's own logger object (a ``getLogger`` call here would name a logger
        # other than ``turnstate``: tests/providers/test_scrub.py keeps every call ours)
        pool_logger = getattr(asyncpg_pool, "logger", None)
        if isinstance(pool_logger, logging.Logger):
            pool_logger.addFilter(_FILTER[0])
    if isinstance(pool, asyncpg.Pool):
        watched = _FILTER[0].pools
        watched[:] = [p for p in watched if not p.is_closing()]
        watched.append(pool)
