"""``PostgresStore.on_pool``: the store on a pool its embedder owns (helper "embedder2").

An application with its own asyncpg pool builds the store on it instead of opening a
second one. The store then never closes the pool; it still creates or checks its schema
(the migrations run under their advisory lock, as ``open`` runs them), and it refuses a
pool whose connections would not find its tables: every statement of the store names
its tables unqualified, so the pool's ``search_path`` must resolve them in ``schema``
(``PostgresStore.session_settings`` gives the ``server_settings`` that do).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import asyncpg

from turnstate.core._errors import ConfigurationError, StorageError, StorageUnavailable
from turnstate.storage._postgres_faults import COMMAND_GRACE
from turnstate.storage._postgres_schema import (
    check_pool_options,
    check_schema_name,
    migrate,
    require_current,
)

Connect = Callable[[], Awaitable[asyncpg.Connection]]


def session_settings(schema: str = "turnstate", *, statement_timeout: float | None = 30.0,
                     application_name: str = "turnstate",
                     read_only: bool = False) -> dict[str, str]:
    """The ``server_settings`` the store's connections need (``asyncpg.create_pool``)."""
    check_schema_name(schema)
    settings = {"search_path": schema, "timezone": "UTC",
                "application_name": application_name}
    if statement_timeout is not None:
        settings["statement_timeout"] = str(max(1, int(statement_timeout * 1000)))
    if read_only:
        settings["default_transaction_read_only"] = "on"
    return settings


async def prepare_pool(pool: Any, *, schema: str, create: bool, acquire_timeout: float,
                       command_timeout: float | None) -> float | None:
    """``PostgresStore.on_pool``'s checks and migration; returns its ``command_timeout``
    (None given: the pool's ``statement_timeout`` plus ``COMMAND_GRACE``, or None).

    Raises:
        ConfigurationError: no asyncpg pool, or one that resolves tables elsewhere.
        StorageError: the migration failed, or (``create=False``) the schema is not current.
        StorageUnavailable: no connection of the pool could be used.
    """
    check_schema_name(schema)
    check_pool_options(1, 1, acquire_timeout, None, command_timeout)
    if not isinstance(pool, asyncpg.Pool):
        msg = f"PostgresStore.on_pool needs an asyncpg.Pool, got {type(pool).__name__}"
        raise ConfigurationError(msg)
    try:
        async with pool.acquire(timeout=acquire_timeout) as conn:
            await (migrate(conn, schema) if create else require_current(conn, schema))
            found = await conn.fetchval("SELECT current_schema()")
            timeout = await conn.fetchval("SELECT current_setting('statement_timeout')")
    except asyncpg.PostgresError as exc:
        msg = f"cannot migrate schema {schema!r}: {exc}"
        raise StorageError(msg) from exc
    except (OSError, TimeoutError, asyncpg.InterfaceError) as exc:
        msg = f"cannot use the given pool: {type(exc).__name__}: {exc}"
        raise StorageUnavailable(msg) from exc
    if found != schema:
        msg = (f"the pool's connections resolve tables in schema {found!r}, not {schema!r}: "
               f"create the pool with server_settings=PostgresStore.session_settings"
               f"({schema!r}) (or a search_path starting with {schema!r})")
        raise ConfigurationError(msg)
    if command_timeout is None and timeout not in (None, "0"):
        command_timeout = _seconds(str(timeout)) + COMMAND_GRACE
    return command_timeout


def _seconds(setting: str) -> float:
    """``statement_timeout`` as PostgreSQL shows it (``30s``, ``1500ms``, ``2min``...)."""
    units = {"ms": 0.001, "s": 1.0, "min": 60.0, "h": 3600.0, "d": 86400.0}
    number = setting.rstrip("abcdefghijklmnopqrstuvwxyz")
    return float(number) * units.get(setting[len(number):] or "ms", 0.001)
