"""Rows as tuples: the three tables' column orders and the records read back from a row.

The SQL stores' statements and ``MemoryStore``'s tuples follow these orders; the
readers turn a row into the ``ChatRecord``, ``Message`` or ``TurnRecord`` the store
contract hands out (JSON columns through ``_records``' one converter).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from turnstate.core._conversation import Message, MessageStatus, Role
from turnstate.core._frozen import slot_maker
from turnstate.storage._commit_columns import CommitColumns
from turnstate.storage._protocol import ChatRecord, TurnLease, TurnRecord, TurnStatus
from turnstate.storage._records import decode_parts, decode_path, decode_usage, parse_ts

CHAT_COLUMNS = ("id", "owner", "created_at", "updated_at", "version", "last_provider_state",
                "last_context_state", "active_turn_id", "active_turn_expires_at",
                "committed_seq", "history_chars")
MESSAGE_COLUMNS = ("id", "chat_id", "seq", "role", "status", "parts", "provider_state",
                   "usage", "created_at", "updated_at")
TURN_COLUMNS = ("id", "chat_id", "user_message_id", "assistant_message_id", "user_seq",
                "assistant_seq", "status", "provider", "model", "strategy", "reason",
                "detail", "path", "started_at", "ended_at")
"""Column orders of the three tables; row tuples and the SELECT lists follow them."""


_chat_record: Callable[[str, str, datetime, datetime, int, str | None, str | None, str | None,
                        datetime | None, int | None, int], ChatRecord] = slot_maker(ChatRecord)
"""``ChatRecord(...)`` of its eleven fields in ``CHAT_COLUMNS``' order (the timestamps as
datetimes), without attrs' ``__init__`` (``core._frozen``): a store builds one or two a
turn (issue 26); an equal value (tested)."""


def chat_from_row(row: Sequence[Any], updated_at: datetime | None = None,
                  expires_at: datetime | None = None) -> ChatRecord:
    """The chat's record; ``updated_at`` and ``expires_at``: the datetimes a store just
    formatted into those columns (what parsing them gives), taken instead of parsed."""
    expires = row[8]
    return _chat_record(
        row[0], row[1], parse_ts(row[2]),
        parse_ts(row[3]) if updated_at is None else updated_at,
        row[4], row[5], row[6], row[7],
        None if expires is None else expires_at or parse_ts(expires),
        row[9], row[10])


def committed_chat(leased: ChatRecord, lease: TurnLease, cols: CommitColumns, *,
                   chars: int, updated_at: datetime) -> ChatRecord:
    """The chat a commit's guarded update leaves (SQLite's ``COMMIT_LEASED_CHAT``):
    begin's (``leased``, found unchanged in what the commit does not set) with the
    commit's columns; ``updated_at``: the datetime written. Built as ``_chat_record``
    (``attrs.evolve`` read the class's fields and built keywords first: tested equal)."""
    return _chat_record(
        leased.id, leased.owner, leased.created_at, updated_at, lease.base_version + 1,
        cols.provider_state, cols.context, None, None, lease.assistant_seq,
        leased.history_chars + chars)


ROLES = {role.value: role for role in Role}
STATUSES = {status.value: status for status in MessageStatus}
"""A stored role and status by their text (every store's row readers)."""


def message_from_row(row: Sequence[Any]) -> Message:
    return Message(
        id=row[0], chat_id=row[1], seq=row[2], role=ROLES[row[3]], status=STATUSES[row[4]],
        parts=decode_parts(row[5]), provider_state=row[6], usage=decode_usage(row[7]),
        created_at=parse_ts(row[8]), updated_at=parse_ts(row[9]),
    )


def turn_from_row(row: Sequence[Any]) -> TurnRecord:
    ended = row[14]
    return TurnRecord(
        id=row[0], chat_id=row[1], user_seq=row[4], assistant_seq=row[5],
        status=TurnStatus(row[6]), provider=row[7], model=row[8], strategy=row[9],
        reason=row[10], detail=row[11], path=decode_path(row[12]),
        started_at=parse_ts(row[13]), ended_at=None if ended is None else parse_ts(ended),
        assistant_message_id=row[3],
    )
