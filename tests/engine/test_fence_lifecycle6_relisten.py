"""A PostgreSQL node whose listening connection is lost listens again while its turns run
(lifecycle6).

A database restart (or a middlebox resetting connections) ends the store's listening
connection. Before, nothing opened it again until a turn started after that (and not
within ``RELISTEN_SECONDS`` of a failed attempt): the turns running meanwhile learnt a
release or a reclaim by another node at their next renewal. The listener's termination
now opens it again (after ``RELISTEN_FIRST``, doubling) while turns run here.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests import pg_support
from tests.engine.test_fence_lifecycle6 import _ended_lease_lost, _listening
from tests.engine.test_lifecycle5_fence_signal import _opened, _stuck_run_turn
from tests.tcp_proxy import TcpProxy, proxied, proxied_dsn, upstream_of
from turnstate.storage import PostgresStore
from turnstate.storage._release import release_chat


@pytest.fixture
async def proxy(pg_schema: str) -> AsyncIterator[TcpProxy]:
    async with proxied(*upstream_of(pg_support.DSN)) as tcp:
        yield tcp


async def test_a_turn_running_through_a_lost_listener_still_stops_at_once(
        proxy: TcpProxy) -> None:
    dsn = proxied_dsn(pg_support.DSN, proxy)
    async with PostgresStore.open(dsn, schema=pg_support.SCHEMA, pool_max=2) as store, \
            _opened("postgres", Path()) as other:
        chat_id, engine, stuck, events, task = await _stuck_run_turn(store)
        await _listening(store)
        assert store.turn_log.listening
        proxy.cut()  # every connection reset (the database restarted); new ones flow
        for _ in range(400):
            if not store.turn_log.listening:
                break
            await asyncio.sleep(0.005)
        await _listening(store)  # opened again (before: not while this turn ran)
        released_at = time.monotonic()
        released = await release_chat(other, chat_id)
        assert released is not None and released.reason == "released"
        took = await _ended_lease_lost(task, events, released_at)
        assert stuck.cancelled
        assert took < 1.0, took
        await engine.aclose()
