"""Faults of a real PostgreSQL server (issue 14, point 4), on the run's own schema.

A statement is held inside its transaction by a trigger that waits for an advisory lock
this test holds; the test finds the waiting backend in ``pg_locks`` (bounded polling,
never a sleep standing in for an event) and then terminates it, lets it time out, or
keeps the pool's only connection busy. Serialization failures and deadlocks come from a
trigger raising their SQLSTATEs for the first N attempts (a sequence counts them across
rolled-back attempts). Each case ends with a typed ``StorageError`` or a retried
success, never a half-written turn.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import time
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import pytest

from tests import pg_support
from tests.storage.support import commit, start
from turnstate.core._errors import (
    StorageContention,
    StoragePoolExhausted,
    StorageTimeout,
)
from turnstate.engine._eager import eager_future
from turnstate.storage import PostgresStore, TurnStatus
from turnstate.storage._postgres_faults import RETRIES

SCHEMA = f"{pg_support.SCHEMA}_faults"


@pytest.fixture
async def admin(pg_schema: str) -> AsyncIterator[asyncpg.Connection]:
    """A plain connection on the faults schema, which starts empty of rows and triggers."""
    schema = SCHEMA
    async with PostgresStore.open(pg_support.DSN, schema=schema):
        pass  # creates and migrates the schema
    conn = await asyncpg.connect(pg_support.DSN, server_settings={"search_path": schema})
    await conn.execute("TRUNCATE chats, messages, turns CASCADE; "
                       "DROP TRIGGER IF EXISTS fault ON turns; "
                       "DROP TRIGGER IF EXISTS fault_update ON turns")
    await conn.execute("INSERT INTO chats (id, owner, created_at, updated_at) "
                       "VALUES ('c1', 'alice', now(), now())")
    try:
        yield conn
    finally:
        await conn.close()


@contextlib.asynccontextmanager
async def _store(admin: asyncpg.Connection, **options: Any) -> AsyncIterator[PostgresStore]:
    name = f"ts-fault-{secrets.token_hex(4)}"
    async with PostgresStore.open(pg_support.DSN, schema=SCHEMA,
                                  application_name=name, **options) as store:
        store.application_name = name  # type: ignore[attr-defined]
        yield store


async def _hold(admin: asyncpg.Connection, when: str) -> int:
    """Make the next ``when`` (``INSERT`` or ``UPDATE``) on turns wait for a lock we hold."""
    key = secrets.randbelow(2**31)
    await admin.execute(f"""
        CREATE OR REPLACE FUNCTION fault_hold() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN PERFORM pg_advisory_xact_lock({key}); RETURN NEW; END $$;
        CREATE TRIGGER fault BEFORE {when} ON turns FOR EACH ROW EXECUTE FUNCTION fault_hold();
        SELECT pg_advisory_lock({key});""")
    return key


async def _waiter(admin: asyncpg.Connection, key: int, *, other_than: int = 0) -> int:
    """The pid of the backend waiting for ``key`` (bounded polling of pg_locks)."""
    deadline = time.monotonic() + 20
    while True:
        pid = await admin.fetchval("SELECT pid FROM pg_locks WHERE locktype = 'advisory' "
                                   "AND NOT granted AND objid = $1 AND pid <> $2", key,
                                   other_than)
        if pid is not None:
            return int(pid)
        assert time.monotonic() < deadline, "no statement ever waited at the trigger"
        await asyncio.sleep(0.02)


async def _counts(admin: asyncpg.Connection) -> tuple[int, int, str | None]:
    row = await admin.fetchrow("SELECT (SELECT count(*) FROM messages), "
                               "(SELECT count(*) FROM turns), "
                               "(SELECT active_turn_id FROM chats WHERE id = 'c1')")
    assert row is not None
    return row[0], row[1], row[2]


@pytest.mark.parametrize("step", ["begin", "commit"])
async def test_backend_terminated_mid_transaction_is_retried_whole(
        admin: asyncpg.Connection, step: str) -> None:
    """``pg_terminate_backend`` inside the write rolls it back; the store retries it on a
    fresh connection, and it lands exactly once."""
    async with _store(admin) as store:
        lease = None if step == "begin" else await store.begin_turn("c1", start("t1"))
        key = await _hold(admin, "INSERT" if step == "begin" else "UPDATE")
        write = asyncio.create_task(store.begin_turn("c1", start("t1")) if lease is None
                                    else store.commit_turn(lease, commit("resp_1")))
        victim = await _waiter(admin, key)
        assert await admin.fetchval("SELECT pg_terminate_backend($1)", victim)
        await _waiter(admin, key, other_than=victim)  # the retry, on another backend
        before = await _counts(admin)
        await admin.execute(f"SELECT pg_advisory_unlock({key})")
        await asyncio.wait_for(write, timeout=20)
    if step == "begin":
        assert before == (0, 0, None)  # the terminated attempt left nothing behind
        assert await _counts(admin) == (2, 1, "t1")
    else:
        assert before == (2, 1, "t1")
        assert await admin.fetchval("SELECT version FROM chats WHERE id = 'c1'") == 1
        assert await admin.fetchval("SELECT count(*) FROM messages "
                                    "WHERE status = 'completed'") == 2


async def test_statement_timeout_is_typed_and_writes_nothing(admin: asyncpg.Connection) -> None:
    """A begin held past ``statement_timeout`` raises StorageTimeout; no row, no lease."""
    key = await _hold(admin, "INSERT")
    async with _store(admin, statement_timeout=0.2) as store:
        with pytest.raises(StorageTimeout):
            await store.begin_turn("c1", start("t1"))
        assert await _counts(admin) == (0, 0, None)
        await admin.execute(f"SELECT pg_advisory_unlock({key})")
        lease = await store.begin_turn("c1", start("t1"))
        await store.commit_turn(lease, commit("resp_1"))
    assert await _counts(admin) == (2, 1, None)


async def test_pool_exhausted_is_typed(admin: asyncpg.Connection) -> None:
    """With the only connection held by a waiting begin, a read raises
    StoragePoolExhausted; the begin then completes."""
    key = await _hold(admin, "INSERT")
    async with _store(admin, pool_max=1, acquire_timeout=0.2) as store:
        begin = asyncio.create_task(store.begin_turn("c1", start("t1")))
        await _waiter(admin, key)
        with pytest.raises(StoragePoolExhausted):
            await store.load_chat("c1")
        await admin.execute(f"SELECT pg_advisory_unlock({key})")
        lease = await asyncio.wait_for(begin, timeout=20)
        assert (await store.load_chat("c1")).active_turn_id == lease.turn_id



async def test_an_eager_begin_timing_out_on_the_pool_does_not_cancel_its_caller(
        admin: asyncpg.Connection) -> None:
    """A turn's begin runs eagerly (``eager_future``): asyncpg's acquire timeout, entered
    before the begin first waits, must end the begin with StoragePoolExhausted, not
    cancel the task that started it (an HTTP handler, whose connection aiohttp then
    closed unanswered: "Server disconnected", issues 25/26)."""
    key = await _hold(admin, "INSERT")
    async with _store(admin, pool_max=1, acquire_timeout=0.2) as store:
        holder = asyncio.create_task(store.begin_turn("c1", start("t1")))
        await _waiter(admin, key)
        begun = eager_future(store.begin_turn("c1", start("t2")))
        assert not begun.done()
        with pytest.raises(StoragePoolExhausted):
            await asyncio.shield(begun)
        assert asyncio.current_task().cancelling() == 0  # type: ignore[union-attr]
        await admin.execute(f"SELECT pg_advisory_unlock({key})")
        await asyncio.wait_for(holder, timeout=20)

async def test_restart_between_turns_is_survived(admin: asyncpg.Connection) -> None:
    """Every pooled connection killed between turns (what a restart does to them): the
    next turn's writes and reads go through on new connections."""
    async with _store(admin, pool_min=2, pool_max=2) as store:
        lease = await store.begin_turn("c1", start("t1"))
        await store.commit_turn(lease, commit("resp_1"))
        name = store.application_name  # type: ignore[attr-defined]
        killed = await admin.fetchval("SELECT count(pg_terminate_backend(pid)) FROM "
                                      "pg_stat_activity WHERE application_name = $1", name)
        assert killed >= 1
        lease = await store.begin_turn("c1", start("t2"))
        chat = await store.commit_turn(lease, commit("resp_2"))
        assert chat.version == 2
        assert [t.status for t in await store.list_turns("c1")] == [TurnStatus.COMPLETED] * 2


async def _fail_first(admin: asyncpg.Connection, sqlstate: str, times: int) -> None:
    await admin.execute(f"""
        DROP TRIGGER IF EXISTS fault ON turns;
        DROP SEQUENCE IF EXISTS fault_attempts;
        CREATE SEQUENCE fault_attempts;
        CREATE OR REPLACE FUNCTION fault_fail() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF nextval('fault_attempts') <= {times} THEN
                RAISE EXCEPTION 'injected' USING ERRCODE = '{sqlstate}';
            END IF;
            RETURN NEW;
        END $$;
        CREATE TRIGGER fault BEFORE INSERT ON turns FOR EACH ROW EXECUTE FUNCTION fault_fail();
        """)


@pytest.mark.parametrize("sqlstate", ["40001", "40P01"])
async def test_serialization_failures_and_deadlocks_are_retried(
        admin: asyncpg.Connection, sqlstate: str) -> None:
    """A few serialization failures or deadlocks are retried to success; more than the
    retries allow give StorageContention and nothing written."""
    await _fail_first(admin, sqlstate, RETRIES)
    async with _store(admin) as store:
        await store.begin_turn("c1", start("t1"))
        assert await admin.fetchval("SELECT last_value FROM fault_attempts") == RETRIES + 1
        assert await _counts(admin) == (2, 1, "t1")
        await admin.execute("TRUNCATE messages, turns CASCADE; "
                            "UPDATE chats SET active_turn_id = NULL, "
                            "active_turn_expires_at = NULL")
        await _fail_first(admin, sqlstate, RETRIES + 1)
        with pytest.raises(StorageContention):
            await store.begin_turn("c1", start("t2"))
        assert await _counts(admin) == (0, 0, None)


async def _hold_first_update_of_messages(admin: asyncpg.Connection) -> int:
    """Make the next ``UPDATE`` of a message (only that one) wait for a lock we hold."""
    key = secrets.randbelow(2**31)
    await admin.execute(f"""
        DROP SEQUENCE IF EXISTS fault_updates;
        CREATE SEQUENCE fault_updates;
        CREATE OR REPLACE FUNCTION fault_hold_once() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF nextval('fault_updates') = 1 THEN PERFORM pg_advisory_xact_lock({key}); END IF;
            RETURN NEW;
        END $$;
        CREATE TRIGGER fault_messages BEFORE UPDATE ON messages FOR EACH ROW
            EXECUTE FUNCTION fault_hold_once();
        SELECT pg_advisory_lock({key});""")
    return key


async def test_a_degradation_write_that_failed_is_read_back_and_sent_again(
        admin: asyncpg.Connection) -> None:
    """Issue 20 on PostgreSQL: the degradation write is held past ``statement_timeout``
    (``StorageTimeout``, rolled back). The engine reads the running answer back through
    ``list_messages``, finds no part, sends the write again once, and the turn commits
    with the part stored once (before, the turn ended ``storage_failed``)."""
    from tests.engine.support import collect, make_turn
    from turnstate.core._conversation import TransitionPart
    from turnstate.emulators._scripted import ScriptedBackend
    from turnstate.engine import TurnEngine

    async with _store(admin, statement_timeout=0.3) as store:
        backend = ScriptedBackend()
        engine = TurnEngine(store, backend.adapters(), backend)
        assert (await collect(engine.run_turn("c1", make_turn("one")))).committed
        key = await _hold_first_update_of_messages(admin)
        try:
            outcome = await collect(engine.run_turn("c1", make_turn("two", model="gpt-4.1")))
        finally:
            await admin.execute("DROP TRIGGER fault_messages ON messages; "
                                f"SELECT pg_advisory_unlock({key})")
        assert outcome.committed, outcome.final
        answer = (await store.load_history("c1"))[-1]
    held = await admin.fetchval("SELECT last_value FROM fault_updates")
    assert held >= 3  # the held write, the one sent again, the commit
    assert [(p.reason, p.recovered) for p in answer.parts
            if isinstance(p, TransitionPart)] == [("model_changed", True)]
