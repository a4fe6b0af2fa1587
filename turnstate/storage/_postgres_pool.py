"""``PostgresStore.on_pool``: the store on a pool its embedder owns (helper "embedder2").

An application with its own asyncpg pool builds the store on it instead of opening a
second one. The store then never closes the pool; it still creates or checks its schema
(the migrations run under their advisory lock, as ``open`` runs them), and it refuses a
pool whose connections would not find its tables: every statement of the store names
its tables unqualified, so the pool's ``search_path`` must resolve them in ``schema``
(``PostgresStore.session_settings`` gives the ``server_settings`` that do).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, TypeVar

import asyncpg

from turnstate.core._errors import ConfigurationError, StorageError, StorageUnavailable
from turnstate.storage._postgres_faults import COMMAND_GRACE
from turnstate.storage._postgres_log import PostgresTurnLog
from turnstate.storage._postgres_schema import (
    check_pool_options,
    check_schema_name,
    migrate,
    require_current,
)
from turnstate.storage._records import Clock

if TYPE_CHECKING:
    from turnstate.storage._postgres import PostgresStore

Connect = Callable[[], Awaitable[asyncpg.Connection]]
S = TypeVar("S", bound="PostgresStore")


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


@asynccontextmanager
async def borrow(cls: type[S], pool: Any, *, schema: str, create: bool,
                 clock: Clock | None, acquire_timeout: float,
                 command_timeout: float | None,
                 listen: Connect | None) -> AsyncIterator[S]:
    """``PostgresStore.on_pool``'s body (its docstring says the rules)."""
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
    store = cls(pool, clock=clock, acquire_timeout=acquire_timeout,
                command_timeout=command_timeout)
    if listen is not None:
        store.turn_log = PostgresTurnLog(store._call, store._now, connect=listen)
    try:
        yield store
    finally:
        await store.turn_log.close()  # the listening connection, never the pool


def _seconds(setting: str) -> float:
    """``statement_timeout`` as PostgreSQL shows it (``30s``, ``1500ms``, ``2min``...)."""
    units = {"ms": 0.001, "s": 1.0, "min": 60.0, "h": 3600.0, "d": 86400.0}
    number = setting.rstrip("abcdefghijklmnopqrstuvwxyz")
    return float(number) * units.get(setting[len(number):] or "ms", 0.001)
