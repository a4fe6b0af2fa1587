"""How ``PostgresStore`` reads a failure: retry it, or which StorageError it is.

Serialization failures, deadlocks and sessions the server ended itself (whose
transaction it rolled back) are retried; a connection that vanished without a word from
the server is retried for a read only (a write may have committed); anything else maps
to the error tree.
"""

from __future__ import annotations

import asyncpg

from turnstate.core._errors import (
    StorageContention,
    StorageError,
    StorageTimeout,
    StorageUnavailable,
)

RETRIES = 4
"""Extra attempts after a retryable failure (serialization, deadlock, server shutdown)."""

_RETRY_STATES = {"40001", "40P01"}  # serialization_failure, deadlock_detected
_GONE_STATES = {"57P01", "57P02", "57P03"}  # admin/crash shutdown, cannot connect now
LOST = (asyncpg.ConnectionDoesNotExistError, asyncpg.InterfaceError, OSError)


COMMAND_GRACE = 5.0
"""Seconds ``PostgresStore`` waits for an answer beyond ``statement_timeout`` (by then
the server has cancelled the statement itself) before it gives the connection up."""


class NotSent(Exception):
    """No connection could be had: the statement never reached the server."""


class Unanswered(Exception):
    """The server gave no answer within the store's ``command_timeout`` (it may be
    gone, or the network to it): the connection was terminated, nothing retried."""

    def __init__(self, seconds: float | None) -> None:
        super().__init__(f"no answer from PostgreSQL within {seconds:g} s")


def _server_gone(exc: BaseException) -> bool:
    """The server ended the session itself (it rolled back what was running)."""
    cause = exc.__cause__
    return getattr(exc, "sqlstate", None) in _GONE_STATES or (
        cause is not None and getattr(cause, "sqlstate", None) in _GONE_STATES)


def retryable(exc: asyncpg.PostgresError, *, write: bool) -> bool:
    if exc.sqlstate in _RETRY_STATES or _server_gone(exc):
        return True
    # A connection that vanished without a word from the server: a read is safe to
    # repeat, a write may have committed and is not.
    return isinstance(exc, asyncpg.PostgresConnectionError) and not write


def translate(exc: BaseException, *, write: bool) -> StorageError:
    if isinstance(exc, asyncpg.QueryCanceledError):
        return StorageTimeout(f"postgres: statement cancelled: {exc}")
    if isinstance(exc, NotSent):
        return StorageUnavailable(f"cannot reach PostgreSQL: {exc.__cause__}")
    if isinstance(exc, Unanswered):  # a write may have landed: the engine reads it back
        return StorageUnavailable(f"postgres: {exc} (the write was applied whole or not "
                                  "at all)") if write else StorageTimeout(f"postgres: {exc}")
    sqlstate = getattr(exc, "sqlstate", None)
    if sqlstate in _RETRY_STATES:
        return StorageContention(f"postgres: still failing after {RETRIES} retries: {exc}")
    if isinstance(exc, (*LOST, asyncpg.PostgresConnectionError)) or _server_gone(exc):
        doubt = "" if _server_gone(exc) or not write else \
            " (the write was applied whole or not at all)"
        return StorageUnavailable(f"postgres connection lost: {exc}{doubt}")
    return StorageError(f"postgres: {exc}")
