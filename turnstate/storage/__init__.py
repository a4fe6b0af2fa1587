"""Persistence: the Store protocol, MemoryStore, SqliteStore and ``open_store``."""

from turnstate.storage._memory import MemoryStore
from turnstate.storage._migrations import LATEST_VERSION, MIGRATIONS
from turnstate.storage._open import is_dsn, open_store
from turnstate.storage._protocol import (
    DEFAULT_LEASE_SECONDS,
    ChatPosition,
    ChatRecord,
    Store,
    TurnAbort,
    TurnCommit,
    TurnLease,
    TurnRecord,
    TurnStart,
    TurnStatus,
)
from turnstate.storage._records import decode_audit, decode_context
from turnstate.storage._sqlite import SqliteStore

__all__ = [
    "DEFAULT_LEASE_SECONDS",
    "LATEST_VERSION",
    "MIGRATIONS",
    "ChatPosition",
    "ChatRecord",
    "MemoryStore",
    "SqliteStore",
    "Store",
    "TurnAbort",
    "TurnCommit",
    "TurnLease",
    "TurnRecord",
    "TurnStart",
    "TurnStatus",
    "decode_audit",
    "decode_context",
    "is_dsn",
    "open_store",
]
