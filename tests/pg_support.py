"""PostgreSQL for the tests: the DSN, this run's schema, reachability, canonical raw rows.

The server is ``TURNSTATE_PG_DSN`` (default ``postgresql://postgres@127.0.0.1:5432/test``).
Each test run works in its own schema, ``SCHEMA`` (a random suffix), which the
``pg_schema`` fixture drops at the end of the run. Without a reachable server the
PostgreSQL tests skip with one reason; with ``CI=true`` they fail instead.
"""

from __future__ import annotations

import asyncio
import os
import secrets
from collections.abc import Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import asyncpg

from turnstate.core._envelope import parse_envelope, serialize_envelope
from turnstate.storage import redact_dsn
from turnstate.storage._postgres_sql import from_pg_json, from_pg_text
from turnstate.storage._record_encoders import encode_audit, encode_context, encode_usage
from turnstate.storage._records import (
    decode_audit,
    decode_context,
    decode_parts,
    decode_path,
    decode_usage,
    encode_parts,
    encode_path,
    format_ts,
    utf8_safe,
)
from turnstate.storage._rows import CHAT_COLUMNS, MESSAGE_COLUMNS, TURN_COLUMNS

T = TypeVar("T")

DSN = os.environ.get("TURNSTATE_PG_DSN", "postgresql://postgres@127.0.0.1:5432/test")
SCHEMA = f"ts_test_{os.getpid()}_{secrets.token_hex(3)}"
"""This test run's schema; every PostgresStore opened by the tests lives in it (or in a
schema named after it: ``SCHEMA + "_..."``), and the run drops them all at its end."""


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in {"1", "true", "yes"}


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to completion on a fresh loop in another thread (callable from a loop)."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()


def unreachable_reason() -> str | None:
    """None if the server answers, else why not (one line)."""

    async def probe() -> None:
        conn = await asyncpg.connect(DSN, timeout=5)
        await conn.close()

    try:
        run_sync(probe())
    except (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
        return f"PostgreSQL not reachable at {redact_dsn(DSN)} ({type(exc).__name__}: {exc})"
    return None


async def drop_test_schemas() -> None:
    conn = await asyncpg.connect(DSN, timeout=5)
    try:
        names = await conn.fetch("SELECT nspname FROM pg_namespace WHERE nspname = $1 "
                                 "OR nspname LIKE $1 || '\\_%'", SCHEMA)
        for (name,) in names:
            await conn.execute(f"DROP SCHEMA IF EXISTS {name} CASCADE")
    finally:
        await conn.close()


def _envelope_text(text: str) -> str:
    return utf8_safe(serialize_envelope(parse_envelope(text)))


_JSON: dict[str, Callable[[str], str]] = {
    "last_provider_state": _envelope_text,
    "last_context_state": lambda text: encode_context(decode_context(text)) or "",
    "parts": lambda text: encode_parts(decode_parts(text)),
    "provider_state": lambda text: encode_audit(decode_audit(text)) or "",
    "usage": lambda text: encode_usage(decode_usage(text)) or "",
    "path": lambda text: encode_path(decode_path(text)),
}
_COLUMNS = {"chats": (*CHAT_COLUMNS, "lease_epoch"), "messages": MESSAGE_COLUMNS,
            "turns": (*TURN_COLUMNS, "attached", "client_key")}
_ORDER = {"chats": "created_at, id", "messages": "chat_id, seq", "turns": "begun"}


def canonical_value(column: str, value: Any) -> Any:
    """A stored PostgreSQL value as the other stores write it: JSON through its type
    (``jsonb`` keeps neither key order nor spacing), times as fixed-width UTC text."""
    if value is None or isinstance(value, int):
        return value
    if column.endswith("_at"):
        return format_ts(value)
    if column in _JSON:
        return _JSON[column](from_pg_json(value))
    return from_pg_text(value)


async def canonical_rows(store: Any, table: str) -> list[dict[str, Any]]:
    """Every row of ``table`` in the other stores' stored form, column by column, in the
    order they were inserted (as SQLite's ``rowid`` gives them)."""
    columns = _COLUMNS[table]
    rows = await store.fetch_raw(f"SELECT {', '.join(columns)} FROM {table} "
                                 f"ORDER BY {_ORDER[table]}")
    return [{name: canonical_value(name, value) for name, value in zip(columns, row,
                                                                       strict=True)}
            for row in rows]
