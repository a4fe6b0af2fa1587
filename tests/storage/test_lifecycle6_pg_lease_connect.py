"""A store call cancelled while its pool opens a connection leaves no stray error
(lifecycle6).

asyncpg's connect sends PostgreSQL's SSL request through a protocol whose future the
connect awaits only once the socket is up: a cancel that lands between the socket's
``connection_made`` and the connect's next step closes the transport, the protocol sets
``ConnectionError('unexpected connection_lost() call')`` on that future, and nobody ever
reads it: the loop logs "Future exception was never retrieved" (seen with a 2 ms
heartbeat, each renewal bounded by the interval). The store's pool now opens its
connections whole (``_postgres_connect.connect_whole``): a cancelled caller leaves the
connect to finish and closes what it made.
"""

from __future__ import annotations

import asyncio
import gc
from typing import Any

import pytest
from asyncpg import connect_utils

from tests import pg_support
from turnstate.storage import PostgresStore

pytestmark = pytest.mark.usefixtures("pg_schema")


async def test_a_call_cancelled_as_its_connection_comes_up_leaves_no_stray_error(
        monkeypatch: pytest.MonkeyPatch) -> None:
    loop = asyncio.get_running_loop()
    stray: list[str] = []
    loop.set_exception_handler(lambda _loop, context: stray.append(
        f"{context.get('message')}: {context.get('exception')!r}"))
    calls: list[asyncio.Future[Any]] = []
    made = 0

    def connection_made(_proto: object, _transport: object) -> None:  # the cut, exactly
        nonlocal made
        made += 1
        for call in calls:
            call.cancel()

    monkeypatch.setattr(connect_utils.TLSUpgradeProto, "connection_made", connection_made,
                        raising=False)
    try:
        async with PostgresStore.open(pg_support.DSN, schema=pg_support.SCHEMA,
                                      pool_min=1, pool_max=1) as store:
            pool: Any = store._pool  # its connection expired: the next call connects
            for _ in range(3):
                await pool.expire_connections()
                calls[:] = [asyncio.ensure_future(store.fetch_raw("SELECT 1"))]
                await asyncio.gather(*calls, return_exceptions=True)
                assert calls[0].cancelled()
            calls.clear()
            assert await store.fetch_raw("SELECT 1")  # the pool still works
            for _ in range(10):  # the abandoned connects end and are closed
                await asyncio.sleep(0.01)
            gc.collect()
            await asyncio.sleep(0)
    finally:
        loop.set_exception_handler(None)
    if made == 0:
        pytest.skip("this server's DSN sends no SSL request (sslmode=disable)")
    assert stray == []
