"""Persistence: the Store protocol, MemoryStore and SqliteStore."""

from turnstate.storage._protocol import (
    DEFAULT_LEASE_SECONDS,
    ChatRecord,
    Store,
    TurnAbort,
    TurnCommit,
    TurnLease,
    TurnRecord,
    TurnStart,
    TurnStatus,
)

__all__ = [
    "DEFAULT_LEASE_SECONDS",
    "ChatRecord",
    "Store",
    "TurnAbort",
    "TurnCommit",
    "TurnLease",
    "TurnRecord",
    "TurnStart",
    "TurnStatus",
]
