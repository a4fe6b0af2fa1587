"""PostgresStore and ownership: migrations 3 and 4 upgrade a live version-2 schema in
place, and every call that addresses a chat stays one statement with its owner check
inside it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import asyncpg
import pytest

from tests import pg_support
from tests.storage.support import (
    T0,
    ManualClock,
    abort,
    assert_counters_match_history,
    committed_turn,
    start,
)
from tests.storage.test_conformance_owners import OWNED_CALLS
from turnstate.core._conversation import TextPart
from turnstate.core._errors import ChatBusy, ChatNotFound
from turnstate.storage import PostgresStore
from turnstate.storage import _postgres_schema as schema_module
from turnstate.storage._postgres_schema import LATEST_VERSION, migrate
from turnstate.storage._turn_log import LoggedEvent


@pytest.fixture
async def v2_schema(pg_schema: str, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[str]:
    """A schema migrated to version 2 only, holding chat c1 (alice's) with one turn
    committed and one begun at T0 under migration 2's functions (a one-second lease)."""
    schema = f"{pg_schema}_v2"
    conn = await asyncpg.connect(pg_support.DSN, server_settings={"search_path": schema})
    try:
        with monkeypatch.context() as patch:
            patch.setattr(schema_module, "LATEST_VERSION", 2)
            assert await migrate(conn, schema) == (1, 2)
        await conn.execute("INSERT INTO chats (id, owner, created_at, updated_at) "
                           "VALUES ('c1', 'alice', $1, $1)", T0)
        begin = "SELECT * FROM ts_begin_turn('c1', $1, $2, 'openai', 'gpt-4o', $3, $4)"
        await conn.execute(begin, "done", '[{"type": "text", "text": "hello"}]', T0,
                           timedelta(seconds=1))
        await conn.execute("SELECT * FROM ts_commit_turn('c1', 'done', 0, "
                           "'[{\"type\": \"text\", \"text\": \"hi\"}]', NULL, NULL, "
                           "NULL, NULL, 'replay', '[]', $1)", T0)
        await conn.execute(begin, "old", "[]", T0, timedelta(seconds=1))
    finally:
        await conn.close()
    yield schema


async def test_migrations_3_and_4_upgrade_a_version_2_schema_in_place(v2_schema: str) -> None:
    """The rows stay and the counters are filled, the old function signatures are gone
    (no ambiguous overloads), and the upgraded functions check the owner and reclaim the
    old turn's expired lease."""
    clock = ManualClock(T0 + timedelta(seconds=10))
    async with PostgresStore.open(pg_support.DSN, schema=v2_schema, clock=clock) as store:
        versions = await store.fetch_raw("SELECT version FROM schema_migrations ORDER BY 1")
        assert [row[0] for row in versions] == list(range(1, LATEST_VERSION + 1))
        functions = await store.fetch_raw(
            "SELECT p.proname, count(*) FROM pg_proc p JOIN pg_namespace n "
            "ON n.oid = p.pronamespace WHERE n.nspname = $1 AND p.proname IN "
            "('ts_begin_turn', 'ts_change_history') GROUP BY 1", (v2_schema,))
        assert dict(functions) == {"ts_begin_turn": 1, "ts_change_history": 1}
        chat = await assert_counters_match_history(store, "c1")
        assert (chat.committed_seq, chat.history_chars) == (2, len("hello") + len("hi"))
        with pytest.raises(ChatNotFound):
            await store.begin_turn("c1", start("new"), owner="mallory")
        lease = await store.begin_turn("c1", start("new"), owner="alice")
        assert lease.user_seq == 5
        assert (await store.load_turn("old")).reason == "lease_expired"
        await store.abort_turn(lease, abort())
        assert await store.delete_messages_from("c1", 2, owner="alice") == 5
        chat = await assert_counters_match_history(store, "c1")
        assert (chat.committed_seq, chat.history_chars) == (1, len("hello"))


@pytest.mark.parametrize("owner", ["alice", "mallory"])
@pytest.mark.parametrize("method", list(OWNED_CALLS))
async def test_each_owned_call_is_one_statement(
        pg_schema: str, method: str, owner: str) -> None:
    """Whether the owner matches or not, the call is one statement (one round trip): the
    owner check is part of the read or of the write's function, not a read before it."""
    async with PostgresStore.open(pg_support.DSN, schema=pg_schema) as store:
        await store.fetch_raw("TRUNCATE chats, messages, turns CASCADE")
        await store.create_chat(owner="alice", chat_id="c1")
        await committed_turn(store, "c1", "t1", cursor="resp_1")
        statements: list[str] = []
        fetch = store._fetch

        async def counting(sql: str, params: Any) -> Any:
            statements.append(sql)
            return await fetch(sql, params)

        store._fetch = counting  # type: ignore[method-assign]
        try:
            await OWNED_CALLS[method](store, owner)
        except ChatNotFound:
            assert owner == "mallory"
        else:
            assert owner == "alice"
        assert len(statements) == 1, statements


async def test_migration_9_moves_each_logged_event_to_a_batch_row(
        pg_schema: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Version 9 keeps the turn-events log one row per write (``turn_event_batches``):
    a version 8 schema's events (a row each) read back equal, and appends go on."""
    schema = f"{pg_schema}_v8"
    datas = ['{"text":"a \\"quoted\\" \u00e9\u4e2d","type":"text_delta"}', "{}"]
    conn = await asyncpg.connect(pg_support.DSN, server_settings={"search_path": schema})
    try:
        with monkeypatch.context() as patch:
            patch.setattr(schema_module, "LATEST_VERSION", 8)
            assert await migrate(conn, schema) == tuple(range(1, 9))
        await conn.execute("INSERT INTO chats (id, owner, created_at, updated_at) "
                           "VALUES ('c1', 'alice', $1, $1)", T0)
        await conn.execute("""INSERT INTO turns (id, chat_id, user_seq, assistant_seq, status,
            provider, model, started_at, begun) OVERRIDING SYSTEM VALUE
            VALUES ('t1', 'c1', 1, 2, 'in_progress', 'openai', 'gpt-4o', $1, 1)""", T0)
        await conn.execute("INSERT INTO turn_logs (turn_id, last_id) VALUES ('t1', 3)")
        await conn.executemany("INSERT INTO turn_events VALUES ('t1', $1, 'text_delta', $2)",
                               [(i, datas[i % 2]) for i in (1, 2, 3)])
    finally:
        await conn.close()
    async with PostgresStore.open(pg_support.DSN, schema=schema) as store:
        log = store.turn_log
        page = await log.read("c1", "t1")
        assert [(e.id, e.type, e.data) for e in page.events] == [
            (i, "text_delta", datas[i % 2]) for i in (1, 2, 3)]
        assert page.last_id == 3
        assert [e.id for e in (await log.read("c1", "t1", after=1, limit=1)).events] == [2]
        await log.append("t1", [LoggedEvent(4, "turn_completed", "{}")])
        assert [e.id for e in (await log.read("c1", "t1", after=2)).events] == [3, 4]
        assert await store.fetch_raw("SELECT count(*) FROM turn_event_batches") == [(4,)]
        assert await store.fetch_raw(
            "SELECT count(*) FROM pg_tables WHERE schemaname = $1 "
            "AND tablename = 'turn_events'", (schema,)) == [(0,)]


async def test_migration_11_makes_a_version_10_schema_refuse_an_edit_under_a_lease(
        pg_schema: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A version 10 schema's edit went through under a live lease; opened by this
    turnstate it migrates forward in place (one ``ts_change_history``, no overload) and
    its edits and deletes under the lease begun before are ``ChatBusy``."""
    schema = f"{pg_schema}_v10"
    conn = await asyncpg.connect(pg_support.DSN, server_settings={"search_path": schema})
    try:
        with monkeypatch.context() as patch:
            patch.setattr(schema_module, "LATEST_VERSION", 10)
            assert await migrate(conn, schema) == tuple(range(1, 11))
        await conn.execute("INSERT INTO chats (id, owner, created_at, updated_at) "
                           "VALUES ('c1', 'alice', $1, $1)", T0)
        await conn.execute("SELECT * FROM ts_take_turn('c1', 't1', "
                           "'[{\"type\": \"text\", \"text\": \"hello\"}]', 'openai', "
                           "'gpt-4o', $1, $2, NULL)", T0, timedelta(seconds=60))
        edit = "SELECT ts_change_history('c1', 'edit', 1, '[]', $1)"
        await conn.execute(edit, T0)  # version 10 took it
    finally:
        await conn.close()
    clock = ManualClock(T0 + timedelta(seconds=10))
    async with PostgresStore.open(pg_support.DSN, schema=schema, clock=clock) as store:
        functions = await store.fetch_raw(
            "SELECT count(*) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace "
            "WHERE n.nspname = $1 AND p.proname = 'ts_change_history'", (schema,))
        assert functions == [(1,)]
        version = (await store.load_chat("c1")).version
        for change in (store.edit_message("c1", 1, ()), store.delete_message("c1", 1)):
            with pytest.raises(ChatBusy) as caught:
                await change
            assert caught.value.active_turn_id == "t1"
        assert (await store.load_chat("c1")).version == version
        clock.advance(60)
        await store.edit_message("c1", 1, (TextPart(text="edited"),))
        assert (await store.load_chat("c1")).version == version + 1
