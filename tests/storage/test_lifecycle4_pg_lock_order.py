"""PostgreSQL: a log append over several turns and a sweep reclaiming several turns lock
those turns in one order, so they never deadlock (helper "lifecycle4").

``append_many`` reads each batch's turn ``FOR SHARE`` (the log's fence) and
``ts_reclaim_expired`` updates each expired turn; both hold every row they locked until
their transaction ends. The append locked its turns in its batches' order and the sweep
in its chats' order: an append of (t2, t1) against a sweep of (t1, t2) deadlocked, and
PostgreSQL aborted one of them after ``deadlock_timeout`` (the log writer's whole batch
failed, or the sweep did). Both now lock turns by id.

The interleaving is made, not hoped for: a third transaction holds t1 while the sweep and
then the append queue behind it; once it lets go, the sweep takes t1 and goes on to t2.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import asyncpg
import pytest

from tests import pg_support
from tests.storage.support import start
from turnstate.storage import PostgresStore
from turnstate.storage._turn_log import LogBatch, LoggedEvent, TurnLogFenced, turn_log_of

WAIT = 10.0  # a bound for a hang only


@pytest.fixture
async def schema(pg_schema: str) -> AsyncIterator[str]:
    name = f"{pg_schema}_lockorder"
    async with PostgresStore.open(pg_support.DSN, schema=name, pool_max=4) as store:
        await store.fetch_raw("TRUNCATE chats, messages, turns CASCADE")
    yield name


async def _connect(schema: str) -> asyncpg.Connection:
    return await asyncpg.connect(pg_support.DSN, server_settings={"search_path": schema})


async def _waiting(probe: asyncpg.Connection, pid_query: str) -> None:
    """Until a backend matching ``pid_query`` waits for a lock (a poll of a state)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + WAIT
    while not await probe.fetchval(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND "
            + pid_query):
        assert loop.time() < deadline, f"nothing waits: {pid_query}"
        await asyncio.sleep(0.01)


def _batch(turn_id: str) -> LogBatch:
    return LogBatch(turn_id, (LoggedEvent(1, "text_delta", json.dumps({"type": "x"})),))


async def test_a_multi_turn_append_and_a_multi_turn_reclaim_do_not_deadlock(
        schema: str) -> None:
    async with PostgresStore.open(pg_support.DSN, schema=schema, pool_max=4) as store:
        for chat_id, turn_id in (("c2", "t2"), ("c1", "t1")):  # t2 stored first
            await store.create_chat(owner="alice", chat_id=chat_id)
            await store.begin_turn(chat_id, start(turn_id, lease_seconds=30))
        gate, sweeper, probe = (await _connect(schema), await _connect(schema),
                                await _connect(schema))
        try:
            holding = gate.transaction()
            await holding.start()
            await gate.execute("SELECT 1 FROM turns WHERE id = 't1' FOR UPDATE")
            sweep = asyncio.ensure_future(sweeper.fetch(
                "SELECT * FROM ts_reclaim_expired(now() + interval '1 hour')"))
            await _waiting(probe, f"pid = {sweeper.get_server_pid()}")
            append = asyncio.ensure_future(
                turn_log_of(store).append_many([_batch("t2"), _batch("t1")]))
            await _waiting(probe, "query LIKE '%turn_event_batches%' AND pid NOT IN "
                           f"({sweeper.get_server_pid()}, {probe.get_server_pid()})")
            await holding.commit()  # the sweep takes t1 first, then wants t2
            done, _ = await asyncio.wait((sweep, append), timeout=WAIT)
            assert len(done) == 2, "still waiting"
            reclaimed = sweep.result()  # on the old order one of the two was the victim
            outcomes = append.result()
        finally:
            for conn in (gate, sweeper, probe):
                await conn.close()
        assert sorted(r["turn_id"] for r in reclaimed) == ["t1", "t2"]
        assert all(isinstance(o, TurnLogFenced) for o in outcomes), outcomes
