"""Open a store from one string, as the command line and the server take it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from turnstate.core._errors import ConfigurationError
from turnstate.storage._protocol import Store
from turnstate.storage._sqlite import SqliteStore

POSTGRES_SCHEMES = ("postgresql://", "postgres://")
DEFAULT_SCHEMA = "turnstate"


def is_dsn(target: str) -> bool:
    """Whether ``target`` names a PostgreSQL database rather than an SQLite file."""
    return target.startswith(POSTGRES_SCHEMES)


def split_schema(dsn: str) -> tuple[str, str]:
    """``(dsn, schema)``: turnstate's own ``schema`` query parameter taken out of the DSN
    (``postgresql://host/db?schema=tenant_a``), ``turnstate`` when there is none."""
    parts = urlsplit(dsn)
    query = parse_qsl(parts.query, keep_blank_values=True)
    schemas = [value for key, value in query if key == "schema"]
    rest = [(key, value) for key, value in query if key != "schema"]
    return urlunsplit(parts._replace(query=urlencode(rest))), (schemas or [DEFAULT_SCHEMA])[-1]


def redact_dsn(target: str) -> str:
    """``target`` fit to print: a DSN loses its password, a path is unchanged."""
    if not is_dsn(target):
        return target
    parts = urlsplit(target)
    if parts.password is None:
        return target
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{parts.username or ''}@{host}"))


@asynccontextmanager
async def open_store(target: str) -> AsyncIterator[Store]:
    """An SQLite file path (or ``:memory:``) opens a ``SqliteStore``; a ``postgresql://``
    (or ``postgres://``) DSN a ``PostgresStore``, in the schema its ``schema`` query
    parameter names (default ``turnstate``). Raises ``ConfigurationError`` when the
    ``postgres`` extra (asyncpg) is not installed."""
    if is_dsn(target):
        try:
            from turnstate.storage._postgres import PostgresStore  # noqa: PLC0415
        except ImportError as exc:  # asyncpg is the optional `postgres` extra
            msg = "PostgreSQL needs asyncpg: pip install 'turnstate[postgres]'"
            raise ConfigurationError(msg) from exc
        dsn, schema = split_schema(target)
        async with PostgresStore.open(dsn, schema=schema) as pg_store:
            yield pg_store
        return
    async with SqliteStore.open(target) as store:
        yield store
