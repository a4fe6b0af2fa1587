"""Persistence: the Store protocol, MemoryStore, SqliteStore, PostgresStore and ``open_store``.

``PostgresStore`` needs the ``postgres`` extra (asyncpg); it is imported on first use,
so the rest of turnstate works without asyncpg installed.
"""

from typing import TYPE_CHECKING, Any

from turnstate.core._content import check_edit_parts
from turnstate.storage._dsn import is_dsn, redact_dsn, split_schema
from turnstate.storage._expected import CutExpected, ExpectedMessage
from turnstate.storage._lean import lean_message, refuse_lean_parts
from turnstate.storage._lean_message import LeanMessage, LeanPart
from turnstate.storage._memory import MemoryStore
from turnstate.storage._migrations import LATEST_VERSION, MIGRATIONS
from turnstate.storage._open import open_store
from turnstate.storage._protocol import (
    DEFAULT_LEASE_SECONDS,
    ChatPosition,
    ChatRecord,
    LeanWindow,
    LeaseRenewal,
    MessageWindow,
    Store,
    TurnAbort,
    TurnCommit,
    TurnLease,
    TurnRecord,
    TurnStart,
    TurnStatus,
)
from turnstate.storage._record_encoders import encode_audit, encode_context
from turnstate.storage._records import decode_audit, decode_context, decode_parts, encode_parts
from turnstate.storage._release import RELEASED, release_chat
from turnstate.storage._sqlite import SqliteStore

if TYPE_CHECKING:
    from turnstate.storage._postgres import PostgresStore

__all__ = [
    "DEFAULT_LEASE_SECONDS",
    "LATEST_VERSION",
    "MIGRATIONS",
    "RELEASED",
    "ChatPosition",
    "ChatRecord",
    "CutExpected",
    "ExpectedMessage",
    "LeanMessage",
    "LeanPart",
    "LeanWindow",
    "LeaseRenewal",
    "MemoryStore",
    "MessageWindow",
    "PostgresStore",
    "SqliteStore",
    "Store",
    "TurnAbort",
    "TurnCommit",
    "TurnLease",
    "TurnRecord",
    "TurnStart",
    "TurnStatus",
    "check_edit_parts",
    "decode_audit",
    "decode_context",
    "decode_parts",
    "encode_audit",
    "encode_context",
    "encode_parts",
    "is_dsn",
    "lean_message",
    "open_store",
    "redact_dsn",
    "refuse_lean_parts",
    "release_chat",
    "split_schema",
]


POSTGRES_EXTRA = ("PostgresStore needs asyncpg, the postgres extra: "
                  "pip install 'turnstate[postgres]'")


def __getattr__(name: str) -> Any:
    if name == "PostgresStore":
        # Imported here: asyncpg is an optional extra.
        try:
            from turnstate.storage._postgres import PostgresStore  # noqa: PLC0415
        except ModuleNotFoundError as exc:
            if exc.name != "asyncpg":
                raise
            raise ModuleNotFoundError(POSTGRES_EXTRA, name="asyncpg") from None
        return PostgresStore
    msg = f"module {__name__!r} has no attribute {name!r}"
    raise AttributeError(msg)
