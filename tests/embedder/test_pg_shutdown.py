"""An embedder's PostgreSQL process shuts down while the store opens its notification
connection (embedder3).

``maintain`` (or ``follow``, ``start_turn``) opens the store's dedicated LISTEN
connection on first use. A shutdown in the middle of that open (a process stopped soon
after it started, or while a sweep re-opens a dropped listener) cancelled the waiter, but
the open ran on, shielded, and stored its connection after the store had closed: asyncpg
warned "unclosed connection" at exit (an error under ``-W error``), and PostgreSQL kept a
backend for it until the process died. The store's close now waits for an open in flight
and closes what it opened.
"""

from __future__ import annotations

import asyncio
import gc
import warnings

import asyncpg

from tests import pg_support
from turnstate import AiohttpTransport, PostgresStore, TurnEngine
from turnstate.emulators import EmulatedProviders
from turnstate.testing import emulated_providers

__all__ = ["emulated_providers"]  # the fixture, imported for pytest


async def test_a_listener_opening_at_shutdown_is_closed_with_the_store(
        pg_schema: str, emulated_providers: EmulatedProviders) -> None:
    schema = pg_schema + "_e3listen"
    asked, gate = asyncio.Event(), asyncio.Event()
    opened: list[asyncpg.Connection] = []

    async def listen() -> asyncpg.Connection:
        asked.set()
        await gate.wait()  # the open is in flight while the process shuts down
        conn = await asyncpg.connect(pg_support.DSN,
                                     server_settings=PostgresStore.session_settings(schema))
        opened.append(conn)
        return conn

    pool = await asyncpg.create_pool(pg_support.DSN, min_size=1, max_size=2,
                                     server_settings=PostgresStore.session_settings(schema))
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            async with PostgresStore.on_pool(pool, schema=schema, listen=listen) as store, \
                    AiohttpTransport() as transport, \
                    TurnEngine(store, emulated_providers.adapters, transport) as engine:
                sweeper = asyncio.create_task(engine.maintain())
                await asyncio.wait_for(asked.wait(), 10)
                asyncio.get_running_loop().call_soon(gate.set)  # opens during the close
            await asyncio.wait([sweeper])
            assert len(opened) == 1
            assert opened[0].is_closed()
            del opened[:]
            gc.collect()
        assert not [w for w in caught if issubclass(w.category, ResourceWarning)]
    finally:
        await pool.close()
