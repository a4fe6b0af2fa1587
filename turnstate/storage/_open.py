"""Open a store from one string, as the command line and the server take it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from turnstate.core._errors import ConfigurationError
from turnstate.storage._dsn import is_dsn, split_schema
from turnstate.storage._protocol import Store
from turnstate.storage._sqlite import SqliteStore


@asynccontextmanager
async def open_store(target: str, *, read_only: bool = False, create: bool = True,
                     pg_pool: tuple[int, int] | None = None,
                     pg_timeouts: tuple[float, float] | None = None) -> AsyncIterator[Store]:
    """An SQLite file path (or ``:memory:``) opens a ``SqliteStore``; a ``postgresql://``
    (or ``postgres://``) DSN a ``PostgresStore``, in the schema its ``schema`` query
    parameter names (default ``turnstate``), with ``pg_pool`` as its pool's (min, max)
    connections and ``pg_timeouts`` as its (statement, acquire) seconds when given
    (``PostgresStore.open``'s defaults otherwise; an SQLite target ignores both).
    Raises ``ConfigurationError`` when the ``postgres`` extra (asyncpg) is not installed.
    ``read_only`` never creates or migrates anything (``inspect`` opens stores so);
    ``create=False`` neither, but writes (``release``). An SQLite file holding other
    tables and no turnstate schema is refused (``SqliteStore.open``'s ``refuse_foreign``)."""
    check_store_target(target)
    if is_dsn(target):
        try:
            from turnstate.storage._postgres import PostgresStore  # noqa: PLC0415
        except ImportError as exc:  # asyncpg is the optional `postgres` extra
            msg = "PostgreSQL needs asyncpg: pip install 'turnstate[postgres]'"
            raise ConfigurationError(msg) from exc
        dsn, schema = split_schema(target)
        pool: dict[str, Any] = {} if pg_pool is None else {
            "pool_min": pg_pool[0], "pool_max": pg_pool[1]}
        if pg_timeouts is not None:
            pool["statement_timeout"], pool["acquire_timeout"] = pg_timeouts
        async with PostgresStore.open(dsn, schema=schema, read_only=read_only,
                                      create=create, **pool) as pg_store:
            yield pg_store
        return
    async with SqliteStore.open(target, read_only=read_only, create=create,
                                refuse_foreign=True) as store:
        yield store


def check_store_target(target: str) -> None:
    """Refuse a URL that is no PostgreSQL DSN (``sqlite:///chats.db``, ``mysql://...``):
    it was opened as an SQLite path, either failing as a file that cannot be opened or
    creating a file named after the URL (``sqlite:chats.db``).

    Raises:
        ConfigurationError: naming the scheme only (the rest may hold a password).
    """
    scheme, sep, _ = target.partition("://")
    if (sep or target.lower().startswith("sqlite:")) and not is_dsn(target):
        shown = f"{scheme}://" if sep else "sqlite:"
        msg = (f"{shown}... is not a store turnstate opens: give an SQLite file path (or "
               ":memory:) or a postgresql:// DSN")
        raise ConfigurationError(msg)
