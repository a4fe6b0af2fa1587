"""Open a store from one string, as the command line and the server take it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from turnstate.core._errors import ConfigurationError
from turnstate.storage._protocol import Store
from turnstate.storage._sqlite import SqliteStore

POSTGRES_SCHEMES = ("postgresql://", "postgres://")


def is_dsn(target: str) -> bool:
    """Whether ``target`` names a PostgreSQL database rather than an SQLite file."""
    return target.startswith(POSTGRES_SCHEMES)


@asynccontextmanager
async def open_store(target: str) -> AsyncIterator[Store]:
    """An SQLite file path (or ``:memory:``) opens a ``SqliteStore``; a ``postgresql://``
    DSN a PostgreSQL store. Raises ``ConfigurationError`` for a backend not installed."""
    if is_dsn(target):
        msg = "PostgreSQL is not supported by this build"
        raise ConfigurationError(msg)
    async with SqliteStore.open(target) as store:
        yield store
