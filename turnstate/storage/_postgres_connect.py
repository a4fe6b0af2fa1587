"""Opening a PostgreSQL connection that a cancel cannot cut half-way (lifecycle6).

asyncpg's connect sends the SSL request through a protocol whose ``on_data`` future it
awaits only once ``loop.create_connection`` has returned: a cancel that lands inside
``create_connection`` after the socket came up (a renewal bounded by a 2 ms interval, a
heartbeat stopped, a consumer gone) closes the transport, the protocol sets
``ConnectionError('unexpected connection_lost() call')`` on a future nobody awaits, and
the loop logs "Future exception was never retrieved" with its traceback. The store's
pool and its listening connection open through ``connect_whole``: the connect runs in
a task of its own that a cancelled caller leaves to finish (bounded by asyncpg's connect
timeout), and what it made is closed then. The caller is cancelled at once as before.
"""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg

CONNECT = "postgres connect"
"""The name of a connect's task (a cancelled caller leaves it to finish)."""
_ABANDONED: set[asyncio.Task[Any]] = set()
"""Connects whose caller was cancelled, held until they end (and their connection is
closed)."""


async def connect_whole(*args: Any, **kwargs: Any) -> Any:
    """``asyncpg.connect(*args, **kwargs)``, never cancelled half-way (the pool's
    ``connect``: it passes ``connection_class``, ``record_class`` and the DSN's
    options)."""
    task = asyncio.get_running_loop().create_task(asyncpg.connect(*args, **kwargs),
                                                  name=CONNECT)
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        if not task.done():
            _ABANDONED.add(task)
            task.add_done_callback(_close_abandoned)
        else:
            _close_abandoned(task)
        raise


def _close_abandoned(task: asyncio.Task[Any]) -> None:
    _ABANDONED.discard(task)
    if task.cancelled():
        return
    if task.exception() is None:  # read, so never "never retrieved"
        task.result().terminate()
