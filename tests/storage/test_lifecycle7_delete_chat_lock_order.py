"""``delete_chat`` against one log append that holds two turns of the same chat (helper
"lifecycle7", the case lifecycle4 and lifecycle6 left).

PostgreSQL: ``append_many`` locks its turns ``FOR SHARE`` by (chat id, id); ``ts_delete_chat``
deleted the chat's turns in the table's physical order, each row locked as it was deleted.
Two ended turns of one chat stored in the other order (``tb`` first, then ``ta``) let the
delete hold ``tb`` while it waited for ``ta``, and the append hold ``ta`` while it waited
for ``tb``: PostgreSQL aborted the append after ``deadlock_timeout`` (1 s), and the store's
retry found the turns gone. ``delete_messages_from`` did the same through the foreign keys
that set its turns' message ids to NULL. Both now lock the turns by id first (schema
version 17).

The interleaving is made, not hoped for: a third transaction holds ``ta`` while the
append and then the delete queue behind it. The other stores write one transaction at a
time (SQLite) or hold no row locks (memory): the same calls at once end, on every store,
with the chat gone and the append either landed first or refused ``TurnNotFound``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import asyncpg
import pytest

from tests import pg_support
from tests.storage.support import Backend, abort, start
from turnstate.core._errors import ChatNotFound, TurnNotFound
from turnstate.storage import PostgresStore, Store
from turnstate.storage._turn_log import LogBatch, LoggedEvent, turn_log_of

WAIT = 10.0  # a bound for a hang only


def _batch(turn_id: str) -> LogBatch:
    return LogBatch(turn_id, (LoggedEvent(1, "text_delta", json.dumps({"type": "x"})),))


async def _two_ended_turns(store: Store) -> None:
    """Chat ``c`` with two ended turns, ``tb`` stored before ``ta``."""
    await store.create_chat(owner="alice", chat_id="c")
    for turn_id in ("tb", "ta"):
        lease = await store.begin_turn("c", start(turn_id, lease_seconds=30))
        await store.abort_turn(lease, abort())


@pytest.fixture
async def schema(pg_schema: str) -> AsyncIterator[str]:
    name = f"{pg_schema}_delorder"
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


@pytest.mark.parametrize("kind", ["chat", "messages_from"])
async def test_a_delete_and_an_append_of_two_of_its_turns_do_not_deadlock(
        schema: str, kind: str) -> None:
    async with PostgresStore.open(pg_support.DSN, schema=schema, pool_max=4) as store:
        await _two_ended_turns(store)
        gate, probe = await _connect(schema), await _connect(schema)
        try:
            holding = gate.transaction()
            await holding.start()
            await gate.execute("SELECT 1 FROM turns WHERE id = 'ta' FOR UPDATE")
            append = asyncio.ensure_future(
                turn_log_of(store).append_many([_batch("tb"), _batch("ta")]))
            others = f"pid NOT IN ({gate.get_server_pid()}, {probe.get_server_pid()})"
            await _waiting(probe, f"query LIKE '%turn_event_batches%' AND {others}")
            delete = asyncio.ensure_future(store.delete_chat("c") if kind == "chat"
                                           else store.delete_messages_from("c", 1))
            called = "delete!_chat" if kind == "chat" else "change!_history"
            await _waiting(probe, f"query LIKE '%ts!_{called}%' ESCAPE '!' AND {others}")
            timeout = await probe.fetchval(
                "SELECT setting::float / 1000 FROM pg_settings WHERE name = 'deadlock_timeout'")
            loop = asyncio.get_running_loop()
            await holding.commit()  # the append takes ta, then wants tb
            let_go = loop.time()
            done, _ = await asyncio.wait((append, delete), timeout=WAIT)
            assert len(done) == 2, "still waiting"
            took = loop.time() - let_go
            # a deadlock is found only after deadlock_timeout (the victim is then retried)
            assert took < timeout, f"{took:.2f} s: a deadlock was waited out"
            outcomes = append.result()  # on the old order one of the two was the victim
            delete.result()
        finally:
            for conn in (gate, probe):
                await conn.close()
        assert outcomes == (None, None)  # it was first in line: it did not wait a deadlock out
        if kind == "chat":
            with pytest.raises(ChatNotFound):
                await store.load_chat("c")
            assert await store.fetch_raw("SELECT count(*) FROM turn_event_batches") == [(0,)]
        else:
            assert await store.list_messages("c") == ()


async def test_a_chat_delete_racing_an_append_of_two_of_its_turns(backend: Backend) -> None:
    store = backend.store
    await _two_ended_turns(store)
    append = asyncio.ensure_future(turn_log_of(store).append_many([_batch("tb"),
                                                                   _batch("ta")]))
    delete = asyncio.ensure_future(store.delete_chat("c"))
    done, _ = await asyncio.wait((append, delete), timeout=WAIT)
    assert len(done) == 2, "still waiting"
    delete.result()
    outcomes = append.result()
    assert all(o is None or isinstance(o, TurnNotFound) for o in outcomes), outcomes
    with pytest.raises(ChatNotFound):
        await store.load_chat("c")
