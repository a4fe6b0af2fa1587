"""``PostgresStore.on_pool``: the store on an embedder's own asyncpg pool (embedder2).

Before, the store could only be opened on a DSN (``open`` made and closed its own
pool): an application with its own pool had to open a second one.
"""

from __future__ import annotations

import asyncpg
import pytest

from tests import pg_support
from turnstate.core import ConfigurationError, StorageError
from turnstate.storage import PostgresStore
from turnstate.storage._postgres_schema import LATEST_VERSION


async def test_a_store_on_the_embedders_pool_migrates_and_leaves_the_pool_open(
        pg_schema: str) -> None:
    schema = pg_schema + "_borrowed"
    pool = await asyncpg.create_pool(pg_support.DSN, min_size=1, max_size=2,
                                     server_settings=PostgresStore.session_settings(schema))
    try:
        async with PostgresStore.on_pool(pool, schema=schema) as store:
            chat = await store.create_chat(owner="alice")
            assert (await store.load_chat(chat.id)).owner == "alice"
            assert store.turn_log.listening is False  # no listen factory: polling
        assert not pool._closed
        async with pool.acquire() as conn:  # the app's pool still works, schema migrated
            assert await conn.fetchval("SELECT max(version) FROM schema_migrations") \
                == LATEST_VERSION
            assert await conn.fetchval("SELECT count(*) FROM chats") == 1
        async with PostgresStore.on_pool(pool, schema=schema, create=False) as again:
            assert (await again.load_chat(chat.id)).id == chat.id
    finally:
        await pool.close()


async def test_a_pool_that_does_not_resolve_the_schema_is_refused(pg_schema: str) -> None:
    pool = await asyncpg.create_pool(pg_support.DSN, min_size=1, max_size=1)
    try:
        with pytest.raises(ConfigurationError, match="session_settings"):
            async with PostgresStore.on_pool(pool, schema=pg_schema + "_elsewhere"):
                pass
        assert not pool._closed
    finally:
        await pool.close()


async def test_create_false_refuses_a_missing_schema(pg_schema: str) -> None:
    schema = pg_schema + "_absent"
    pool = await asyncpg.create_pool(pg_support.DSN, min_size=1, max_size=1,
                                     server_settings=PostgresStore.session_settings(schema))
    try:
        with pytest.raises(StorageError, match="version 0"):
            async with PostgresStore.on_pool(pool, schema=schema, create=False):
                pass
    finally:
        await pool.close()


async def test_listen_factory_gives_notifications_and_its_connection_is_closed(
        pg_schema: str) -> None:
    schema = pg_schema + "_listen"
    settings = PostgresStore.session_settings(schema)
    pool = await asyncpg.create_pool(pg_support.DSN, min_size=1, max_size=2,
                                     server_settings=settings)
    try:
        async with PostgresStore.on_pool(
                pool, schema=schema,
                listen=lambda: asyncpg.connect(pg_support.DSN, server_settings=settings),
        ) as store:
            assert await store.turn_log.listen()
        assert not store.turn_log.listening
        assert not pool._closed
    finally:
        await pool.close()


def test_session_settings_match_what_open_uses() -> None:
    assert PostgresStore.session_settings("s1", statement_timeout=1.5, read_only=True) == {
        "search_path": "s1", "timezone": "UTC", "application_name": "turnstate",
        "statement_timeout": "1500", "default_transaction_read_only": "on"}
    with pytest.raises(ConfigurationError):
        PostgresStore.session_settings("no; drop")
