"""PostgresStore specifics: the schema's constraints, migrations under concurrent opens,
the database's clock, and the codec for text PostgreSQL cannot hold."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import pytest
from hypothesis import given, settings

from tests import pg_support
from tests.storage.support import committed_turn, start
from tests.strategies import pg_awkward_text, stored_parts
from turnstate.core._errors import ChatBusy, StorageError, TurnNotFound
from turnstate.storage import PostgresStore
from turnstate.storage import _postgres as postgres_module
from turnstate.storage._postgres_log import EXPIRE
from turnstate.storage._postgres_schema import LATEST_VERSION
from turnstate.storage._postgres_sql import from_pg_json, from_pg_text, to_pg_json, to_pg_text
from turnstate.storage._records import encode_parts
from turnstate.storage._turn_log import LogBatch, LoggedEvent


@pytest.fixture
async def raw(pg_schema: str) -> AsyncIterator[asyncpg.Connection]:
    """A plain connection on a migrated schema holding one committed turn."""
    schema = f"{pg_schema}_raw"
    async with PostgresStore.open(pg_support.DSN, schema=schema) as store:
        await store.fetch_raw("TRUNCATE chats, messages, turns CASCADE")
        await store.create_chat(owner="alice", chat_id="c1")
        await committed_turn(store, "c1", "t1", cursor="resp_1")
    conn = await asyncpg.connect(pg_support.DSN, server_settings={"search_path": schema})
    try:
        yield conn
    finally:
        await conn.close()


@pytest.mark.parametrize("statement", [
    "UPDATE messages SET status = 'done'",
    "UPDATE messages SET role = 'system'",
    "UPDATE messages SET seq = 0",
    "UPDATE messages SET parts = '{}'",
    "INSERT INTO messages VALUES ('m', 'c1', 1, 'user', 'completed', '[]', NULL, NULL, "
    "now(), now())",
    "INSERT INTO messages VALUES ('m', 'gh', 9, 'user', 'completed', '[]', NULL, NULL, "
    "now(), now())",
    "UPDATE chats SET last_provider_state = '{\"mode\": \"stateless-loop\"}'",
    "UPDATE chats SET last_provider_state = '{\"loopMessages\": []}'",
    "UPDATE messages SET provider_state = '{\"a\": {\"loopMessages\": []}}'",
    "UPDATE chats SET active_turn_id = 'x', active_turn_expires_at = NULL",
    "UPDATE chats SET version = -1",
    "UPDATE turns SET status = 'finished'",
    "UPDATE turns SET chat_id = 'ghost'",
])
async def test_constraints_refuse_bad_rows(raw: asyncpg.Connection, statement: str) -> None:
    """Checks, unique seqs, foreign keys and the loop-state checks hold for any writer."""
    with pytest.raises(asyncpg.IntegrityConstraintViolationError):
        await raw.execute(statement)


async def test_concurrent_opens_migrate_once(pg_schema: str) -> None:
    """Stores opening a new schema at once (separate pools) migrate it exactly once."""
    schema = f"{pg_schema}_race"

    async def open_one() -> int:
        async with PostgresStore.open(pg_support.DSN, schema=schema) as store:
            rows = await store.fetch_raw("SELECT count(*) FROM chats")
            return int(rows[0][0])

    assert await asyncio.gather(*(open_one() for _ in range(6))) == [0] * 6
    async with PostgresStore.open(pg_support.DSN, schema=schema) as store:
        rows = await store.fetch_raw("SELECT version FROM schema_migrations ORDER BY 1")
    assert [row[0] for row in rows] == list(range(1, LATEST_VERSION + 1))


async def test_newer_schema_is_refused(raw: asyncpg.Connection, pg_schema: str) -> None:
    """A schema written by a newer turnstate is refused at open, not misread."""
    await raw.execute("INSERT INTO schema_migrations (version) VALUES (99)")
    with pytest.raises(StorageError, match="version 99"):
        async with PostgresStore.open(pg_support.DSN, schema=f"{pg_schema}_raw"):
            pass
    await raw.execute("DELETE FROM schema_migrations WHERE version = 99")


async def test_leases_run_on_the_database_clock(
        raw: asyncpg.Connection, pg_schema: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A process whose clock is years off still takes a lease of the database's time, and
    another process sees it live."""
    monkeypatch.setattr(postgres_module, "utc_now", lambda: datetime(1999, 1, 1, tzinfo=UTC))
    schema = f"{pg_schema}_raw"
    async with PostgresStore.open(pg_support.DSN, schema=schema) as skewed, \
            PostgresStore.open(pg_support.DSN, schema=schema) as other:
        before = await raw.fetchval("SELECT clock_timestamp()")
        lease = await skewed.begin_turn("c1", start("t2", lease_seconds=60))
        after = await raw.fetchval("SELECT clock_timestamp()")
        assert before + timedelta(seconds=60) <= lease.expires_at <= after + timedelta(
            seconds=60)
        with pytest.raises(ChatBusy):
            await other.begin_turn("c1", start("t3"))


@given(text=pg_awkward_text)
def test_text_codec_round_trips(text: str) -> None:
    """Any text maps to text PostgreSQL can hold (no NUL, no surrogate) and back."""
    stored = to_pg_text(text)
    assert "\x00" not in stored and not any("\ud800" <= c <= "\udfff" for c in stored)
    assert from_pg_text(stored) == text


@settings(max_examples=60)
@given(parts=stored_parts(), text=pg_awkward_text)
def test_json_codec_round_trips_through_jsonb(pg_schema: str, parts: object,
                                              text: str) -> None:
    """Parts of any text survive jsonb: the value read back equals the value written."""
    encoded = encode_parts([parts])  # type: ignore[list-item]
    wrapped = json.dumps({"key \x00": text, "parts": json.loads(encoded)})

    async def round_trip() -> list[str]:
        conn = await asyncpg.connect(pg_support.DSN)
        try:
            return [from_pg_json(await conn.fetchval("SELECT $1::jsonb::text", to_pg_json(t)))
                    for t in (encoded, wrapped)]
        finally:
            await conn.close()

    back_parts, back_wrapped = asyncio.run(round_trip())
    assert json.loads(back_parts) == json.loads(encoded)
    assert json.loads(back_wrapped) == json.loads(wrapped)


async def test_the_log_expiry_sweep_scans_neither_every_turn_nor_every_event(
        raw: asyncpg.Connection) -> None:
    """``EXPIRE`` reads the unexpired logs, each one's turn by its key, and deletes the
    doomed logs' events off the primary key (issue 26). With a day's worth of logs not
    yet due, the ``turn_id IN (SELECT ...)`` shapes were planned as a hash join over a
    scan of every turn and a scan of every logged event, inside the sweep."""
    turns = 20_000
    await raw.execute("""INSERT INTO turns (id, chat_id, user_seq, assistant_seq, status,
        provider, model, started_at, ended_at, begun) OVERRIDING SYSTEM VALUE
        SELECT 'x' || g, 'c1', 2 * g + 10, 2 * g + 11, 'completed', 'p', 'm',
            now() - interval '2 days', CASE WHEN g > $1 - 5000 THEN now()
                ELSE now() - interval '2 days' END, g + 10
        FROM generate_series(1, $1::int) g""", turns)
    # 5 logs due, 5,000 logs of recent turns (20 events each) not due, the rest expired
    await raw.execute("""INSERT INTO turn_logs (turn_id, last_id, expired)
        SELECT 'x' || g, 20, g <= $1 - 5005 FROM generate_series(1, $1::int) g""", turns)
    await raw.execute("""INSERT INTO turn_event_batches (turn_id, last_id, first_id, events)
        SELECT 'x' || g, e, e, '[]' FROM generate_series($1::int - 5004, $1::int) g,
            generate_series(1, 20) e""", turns)
    await raw.execute("ANALYZE")
    cutoff = datetime.now(UTC) - timedelta(days=1)
    # a time (``ended_before``, or an injected clock's), or an age on the database's clock
    for params in ((cutoff, None), (None, timedelta(days=1))):
        plan = "\n".join(row[0] for row in await raw.fetch(f"EXPLAIN {EXPIRE}", *params))
        assert "Seq Scan on turns" not in plan, plan
        assert "Seq Scan on turn_event_batches" not in plan, plan
    assert await raw.fetchval(EXPIRE, None, timedelta(days=1)) == 5
    assert await raw.fetchval("SELECT count(*) FROM turn_event_batches") == 5000 * 20
    assert await raw.fetchval("SELECT count(*) FROM turn_logs WHERE NOT expired") == 5000


async def test_several_turns_events_are_logged_in_one_statement(pg_schema: str) -> None:
    """``append_many`` writes every turn's batch in one statement, one round trip (issue
    26: it was one ``APPEND`` per batch, so a tick's write cost grew with the number of
    running turns); an unknown turn is still refused alone."""
    async with PostgresStore.open(pg_support.DSN, schema=f"{pg_schema}_many") as store:
        await store.fetch_raw("TRUNCATE chats, messages, turns CASCADE")
        for n in range(3):
            await store.create_chat(owner="alice", chat_id=f"c{n}")
            await store.begin_turn(f"c{n}", start(f"t{n}"))
        log = store.turn_log
        await log.append("t2", [LoggedEvent(1, "text_delta", "{}")])
        sent: list[str] = []
        call = log._call

        async def counted(sql: str, params: Any, **options: Any) -> Any:
            sent.append(sql)
            return await call(sql, params, **options)

        log._call = counted  # type: ignore[method-assign]
        batches = [LogBatch(f"t{n}", tuple(LoggedEvent(i, "text_delta", f'{{"i":{i}}}')
                                           for i in (2, 3)), truncate=n == 2)
                   for n in range(3)]
        outcomes = await log.append_many([*batches, LogBatch("nope", batches[0].events)])
        assert len(sent) == 1
        assert outcomes[:3] == (None, None, None) and isinstance(outcomes[3], TurnNotFound)
        for n in range(3):
            page = await log.read(f"c{n}", f"t{n}")
            assert [e.id for e in page.events] == [2, 3] and page.last_id == 3
            assert page.truncated == (n == 2)
