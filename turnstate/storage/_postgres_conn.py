"""``PostgresStore``'s pool: opening (create the pool, migrate the schema) and the one-statement
call every operation goes through.

Failures of a real server map to the error tree: serialization failures, deadlocks and
connections the server shut down (whose transaction it rolled back) are retried a
bounded number of times on a fresh connection; a connection that drops mid-statement is
``StorageUnavailable`` for a write (it committed whole or not at all) and retried for a
read; ``statement_timeout`` is ``StorageTimeout``; a pool that stays busy is
``StoragePoolExhausted``. Every statement is bounded on this side too (``command_timeout``):
a server that stops answering (a black-holed network, a hung host) is ``StorageTimeout``
for a read and ``StorageUnavailable`` for a write once it runs out, its connection
terminated (never waited for: asyncpg's cancel request would go into the same hole).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Any, Self

import asyncpg

from turnstate.core._errors import (
    ChatAlreadyExists,
    ConfigurationError,
    StorageError,
    StoragePoolExhausted,
    StorageUnavailable,
    TurnAlreadyRecorded,
)
from turnstate.storage import _postgres_sql as q
from turnstate.storage._dsn import check_dsn, redact_dsn, without_secrets
from turnstate.storage._postgres_connect import connect_whole
from turnstate.storage._postgres_faults import (
    COMMAND_GRACE,
    LOST,
    RETRIES,
    NotSent,
    Unanswered,
    retryable,
    translate,
)
from turnstate.storage._postgres_log import PostgresTurnLog
from turnstate.storage._postgres_outage_log import OUTAGES, quiet_reconnects, reached
from turnstate.storage._postgres_pool import Connect, prepare_pool, session_settings
from turnstate.storage._postgres_schema import (
    check_pool_options,
    check_schema_name,
    migrate,
    require_current,
)
from turnstate.storage._records import (
    Clock,
)


class PostgresConnection:
    """``PostgresStore``'s pool and statement plumbing (the store is its subclass)."""

    def __init__(self, pool: asyncpg.Pool, *, clock: Clock | None = None,
                 acquire_timeout: float = 10.0, command_timeout: float | None = None) -> None:
        self._pool = pool
        quiet_reconnects(pool)  # an outage is two log lines, not a traceback a retry
        self._clock = clock
        self._acquire_timeout = acquire_timeout
        self._command_timeout = command_timeout
        self.turn_log = PostgresTurnLog(self._call, self._now)

    @classmethod
    @asynccontextmanager
    async def open(
        cls, dsn: str, *, pool_min: int = 1, pool_max: int = 10, schema: str = "turnstate",
        clock: Clock | None = None, acquire_timeout: float = 10.0,
        statement_timeout: float | None = 30.0, application_name: str = "turnstate",
        read_only: bool = False, create: bool = True, command_timeout: float | None = None,
    ) -> AsyncIterator[Self]:
        """Open a pool on ``dsn``, migrate ``schema`` (creating it), close the pool on exit.

        Args:
            dsn: ``postgresql://user@host:port/database`` (any libpq-style DSN asyncpg takes).
            pool_min, pool_max: the pool's connection bounds.
            schema: the PostgreSQL schema holding the tables (a plain identifier).
            clock: tests only: read times here instead of the database's clock.
            acquire_timeout: seconds to wait for a free connection (``StoragePoolExhausted``).
            statement_timeout: seconds before the server cancels a statement
                (``StorageTimeout``); None for no limit.
            application_name: how the connections show in ``pg_stat_activity``.
            read_only: never create or migrate the schema (it must exist, at the current
                version), and run every transaction read-only.
            create: False never creates or migrates the schema either (it must exist, at
                the current version), but writes as usual (``turnstate release``).
            command_timeout: seconds this side waits for a statement's answer before it
                gives the connection up; None: ``statement_timeout`` plus
                ``COMMAND_GRACE`` (the server's typed timeout comes first), or no bound
                when ``statement_timeout`` is None.

        Raises:
            ConfigurationError: ``dsn`` cannot be one (not a URL, a port past 65535 or
                no number, an option asyncpg refuses), never quoting it.
            StorageUnavailable: the server cannot be reached.
            StorageError: the schema was written by a newer turnstate.
        """
        check_dsn(dsn)
        check_schema_name(schema)
        check_pool_options(pool_min, pool_max, acquire_timeout, statement_timeout,
                           command_timeout)
        if command_timeout is None and statement_timeout is not None:
            command_timeout = statement_timeout + COMMAND_GRACE
        settings = session_settings(schema, statement_timeout=statement_timeout,
                                    application_name=application_name, read_only=read_only)
        try:
            pool = await asyncpg.create_pool(dsn, min_size=pool_min, max_size=pool_max,
                                             server_settings=settings, reset=_keep_session,
                                             connect=connect_whole)
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
            msg = f"cannot open PostgreSQL at {redact_dsn(dsn)}: {exc}"
            raise StorageUnavailable(msg) from exc
        except (ValueError, OverflowError) as exc:  # asyncpg's DSN parser (a bad port,
            # an unknown option...) or the socket's port check: never the DSN quoted
            msg = f"not a usable PostgreSQL DSN: {without_secrets(str(exc), dsn)}"
            raise ConfigurationError(msg) from None
        try:
            try:
                async with pool.acquire() as conn:
                    await (require_current(conn, schema) if read_only or not create
                           else migrate(conn, schema))
            except asyncpg.PostgresError as exc:
                msg = f"cannot migrate schema {schema!r}: {exc}"
                raise StorageError(msg) from exc
            store = cls(pool, clock=clock, acquire_timeout=acquire_timeout,
                        command_timeout=command_timeout)
            store.turn_log = PostgresTurnLog(store._call, store._now, connect=lambda: (
                connect_whole(dsn, server_settings=settings)))
            try:
                yield store
            finally:
                await store.turn_log.close()
        finally:
            await pool.close()

    @classmethod
    @asynccontextmanager
    async def on_pool(
        cls, pool: asyncpg.Pool, *, schema: str = "turnstate", create: bool = True,
        clock: Clock | None = None, acquire_timeout: float = 10.0,
        command_timeout: float | None = None, listen: Connect | None = None,
    ) -> AsyncIterator[Self]:
        """The store on a pool you own: ``async with PostgresStore.on_pool(pool) as store``.

        The store never closes ``pool`` (nor on exit). It migrates ``schema`` on entry as
        ``open`` does (``create=False``: only checks it is current) and refuses
        (``ConfigurationError``) a pool whose connections do not resolve unqualified
        names in ``schema``: create it with
        ``server_settings=PostgresStore.session_settings(schema)``. ``command_timeout``
        None is the pool's ``statement_timeout`` plus ``COMMAND_GRACE``. ``listen`` opens
        a dedicated connection for turn-event notifications (``follow``, remote
        ``stop``); None polls. Your pool's ``reset`` runs on every release (asyncpg's
        default costs a round trip per store call; ``open``'s pool skips it).
        """
        command_timeout = await prepare_pool(pool, schema=schema, create=create,
                                             acquire_timeout=acquire_timeout,
                                             command_timeout=command_timeout)
        store = cls(pool, clock=clock, acquire_timeout=acquire_timeout,
                    command_timeout=command_timeout)
        if listen is not None:
            store.turn_log = PostgresTurnLog(store._call, store._now, connect=listen)
        try:
            yield store
        finally:
            await store.turn_log.close()  # the listening connection, never the pool

    session_settings = staticmethod(session_settings)

    # -- plumbing ----------------------------------------------------------------------

    def _now(self) -> datetime | None:
        return None if self._clock is None else self._clock()

    async def fetch_raw(self, sql: str, params: Sequence[Any] = ()) -> list[asyncpg.Record]:
        """Run one SQL statement and return its rows: for diagnostics and invariant checks."""
        return await self._call(sql, params, write=False)

    async def _call(self, sql: str, params: Sequence[Any], *, write: bool,
                    chat_id: str = "", base_version: int = 0, seq: int = 0,
                    duplicate_chat: str | None = None,
                    duplicate_turn: str = "") -> list[asyncpg.Record]:
        """One statement, retried on the failures after which retrying is safe."""
        for attempt in range(RETRIES + 1):
            try:
                return await self._fetch(sql, params)
            except asyncpg.UniqueViolationError as exc:
                if duplicate_turn:
                    raise TurnAlreadyRecorded(duplicate_turn) from None
                if duplicate_chat is not None:
                    raise ChatAlreadyExists(duplicate_chat) from None
                msg = f"postgres: {exc}"
                raise StorageError(msg) from None
            except asyncpg.PostgresError as exc:
                if exc.sqlstate in q.SERVER_ERRORS:
                    raise q.server_error(exc, chat_id, base_version, seq) from None
                if attempt == RETRIES or not retryable(exc, write=write):
                    raise translate(exc, write=write) from exc
            except (NotSent, Unanswered, *LOST) as exc:
                if attempt == RETRIES or isinstance(exc, Unanswered) \
                        or (write and not isinstance(exc, NotSent)):
                    raise translate(exc, write=write) from exc
            await asyncio.sleep(min(0.2, 0.005 * 2**attempt))
        msg = "unreachable: the last attempt always returns or raises"
        raise AssertionError(msg)  # pragma: no cover

    async def _fetch(self, sql: str, params: Sequence[Any]) -> list[asyncpg.Record]:
        try:
            conn = await self._pool.acquire(timeout=self._acquire_timeout)
        except TimeoutError as exc:
            msg = f"no pooled connection came free within {self._acquire_timeout} s"
            raise StoragePoolExhausted(msg) from exc
        except (*LOST, asyncpg.PostgresError) as exc:
            raise NotSent from exc
        try:
            rows: list[asyncpg.Record] = await conn.fetch(sql, *params,
                                                          timeout=self._command_timeout)
            if OUTAGES:  # the database answered: an outage of this pool's has ended
                reached(self._pool)
        except TimeoutError as exc:
            conn.terminate()  # no cancel request: it would wait on the same silent server
            raise Unanswered(self._command_timeout) from exc
        except asyncio.CancelledError:
            conn.terminate()  # released at once, not after a cancel request's round trip
            raise
        except UnicodeEncodeError as exc:
            msg = f"postgres: {exc}"
            raise StorageError(msg) from exc
        except asyncpg.InternalClientError as exc:
            # The server ended an idle session (its FATAL message was read, its close not
            # yet): the connection refuses to start the statement, nothing was sent.
            conn.terminate()
            raise NotSent from exc
        finally:
            await self._pool.release(conn)
        return rows


async def _keep_session(conn: asyncpg.Connection) -> None:
    """The pool's reset on release, instead of asyncpg's ``RESET ALL`` and friends.

    That default costs a round trip per store call. The store's statements leave no
    session state behind (no ``SET``, no session advisory lock, no cursor, no
    ``LISTEN``), and the pool rolls back an open transaction before calling this.
    """
