"""The ``MemoryStore``'s rows: its tables in dictionaries, the raw views the invariant
checks read, and the row helpers its reads and writes share."""

from __future__ import annotations

import logging
import operator
from collections.abc import Callable
from datetime import datetime
from typing import Any

from turnstate.core._conversation import MessageStatus
from turnstate.core._errors import ChatBusy, ChatNotFound, ConfigurationError, MessageNotFound
from turnstate.core._frozen import slot_maker
from turnstate.storage._commit_columns import stored_chars
from turnstate.storage._fence_signal import signal_fenced
from turnstate.storage._lease_clock import Seconds, memory_lease_clock
from turnstate.storage._memory_log import MemoryTurnLog
from turnstate.storage._memory_quota import MemoryQuota, message_bytes
from turnstate.storage._protocol import ChatRecord, TurnLease
from turnstate.storage._quota import text_bytes
from turnstate.storage._reclaimed import reclaimed_audit
from turnstate.storage._records import (
    CLEAR_LOG,
    LEASE_EXPIRED,
    RECLAIM_LOG,
    Clock,
    format_ts,
    utc_now,
)
from turnstate.storage._rows import CHAT_COLUMNS, MESSAGE_COLUMNS, TURN_COLUMNS, chat_from_row

_LOG = logging.getLogger("turnstate")

Row = dict[str, Any]

_IN_PROGRESS = MessageStatus.IN_PROGRESS.value
_COMPLETED = MessageStatus.COMPLETED.value
_ABORTED = MessageStatus.ABORTED.value


# A row's values in its table's column order, in one C call each (issue 26: a generator
# over the columns was 13 Python calls per record, two records per turn).
_chat_values = operator.itemgetter(*CHAT_COLUMNS)
_message_values = operator.itemgetter(*MESSAGE_COLUMNS)
_turn_values = operator.itemgetter(*TURN_COLUMNS)
# begin's lease without attrs' __init__ (core._frozen)
_lease: Callable[[str, str, str, str, int, int, int, datetime, int, int | None,
                  ChatRecord | None], TurnLease] = slot_maker(TurnLease)


class MemoryRows(MemoryQuota):
    """``MemoryStore``'s tables and row helpers (the store is its subclass)."""

    def __init__(self, *, clock: Clock | None = None, monotonic: Seconds | None = None) -> None:
        self._clock = clock or utc_now
        self._lease_clock = memory_lease_clock(clock, monotonic)  # see ``_lease_clock``
        self._chats: dict[str, Row] = {}
        self._messages: dict[str, Row] = {}
        self._by_seq: dict[str, dict[int, Row]] = {}  # chat id -> seq -> row, seq order
        self._turns: dict[str, Row] = {}  # insertion order is begin order
        self._chat_turns: dict[str, list[str]] = {}
        self._titles: dict[str, str] = {}  # chat id -> the title rename_chat set
        self._used: dict[str, int] = {}  # owner -> stored bytes (``_memory_quota``)
        self.turn_log = MemoryTurnLog(turns=self._turns, chats=self._chats, clock=self._clock,
                                      grow=self._grow)

    # -- raw rows, for invariant checks ------------------------------------------------

    def raw_chat_state(self, chat_id: str) -> str | None:
        """The stored text of ``chats.last_provider_state`` (ChatNotFound if unknown)."""
        state: str | None = self._chat_row(chat_id)["last_provider_state"]
        return state

    def raw_rows(self, table: str) -> tuple[Row, ...]:
        """Copies of every stored row of ``chats``, ``messages`` or ``turns``."""
        tables = {"chats": self._chats, "messages": self._messages, "turns": self._turns}
        if table not in tables:
            msg = f"unknown table {table!r}"
            raise ConfigurationError(msg)
        return tuple(dict(row) for row in tables[table].values())

    # -- helpers -----------------------------------------------------------------------

    def _now(self) -> str:
        return format_ts(self._clock())

    def _lease_now(self) -> str:
        """Now on the lease timeline, to compare with a lease's expiry."""
        return format_ts(self._lease_clock())

    def _record(self, row: Row, updated: datetime | None = None,
                expires: datetime | None = None) -> ChatRecord:
        """The chat's record (``updated``, ``expires``: as ``chat_from_row`` takes them)."""
        return chat_from_row(_chat_values(row), updated, expires)

    def _chat_row(self, chat_id: str, owner: str | None = None) -> Row:
        row = self._chats.get(chat_id)
        if row is None or (owner is not None and row["owner"] != owner):
            raise ChatNotFound(chat_id)
        return row

    def _chat_messages(self, chat_id: str, owner: str | None = None) -> list[Row]:
        self._chat_row(chat_id, owner)
        return list(self._by_seq[chat_id].values())

    @staticmethod
    def _refuse_live_lease(chat: Row, now: str) -> None:
        active = chat["active_turn_id"]
        if active is not None and chat["active_turn_expires_at"] > now:
            raise ChatBusy(chat["id"], active)

    def _drop_messages(self, chat_id: str, rows: list[Row]) -> None:
        """Delete ``rows``; the committed ones leave the chat's counters."""
        gone = {row["id"] for row in rows}
        committed = [row for row in rows if row["status"] == _COMPLETED]
        chars = sum(stored_chars(row["parts"]) for row in committed)  # before any change
        self._grow(self._chats[chat_id]["owner"], -sum(message_bytes(row) for row in rows))
        for row in rows:
            del self._by_seq[chat_id][row["seq"]]
            del self._messages[row["id"]]
        for turn_id in self._chat_turns[chat_id]:  # ON DELETE SET NULL, as in SQLite
            turn = self._turns[turn_id]
            for column in ("user_message_id", "assistant_message_id"):
                if turn[column] in gone:
                    turn[column] = None
        if committed:
            chat = self._chats[chat_id]
            chat["history_chars"] -= chars
            chat["committed_seq"] = next((row["seq"] for row in reversed(
                self._by_seq[chat_id].values()) if row["status"] == _COMPLETED), None)

    def _cut(self, chat: Row, seq: int, now: str) -> int:
        """Delete the messages from ``seq`` on (checked: there is one at ``seq``), clear
        the cursor and bump the version; how many went (``delete_messages_from`` and a
        begin that replaces)."""
        chat_id = chat["id"]
        doomed = [row for at, row in self._by_seq[chat_id].items() if at >= seq]
        self._drop_messages(chat_id, doomed)
        self._bump(chat, now)
        _LOG.info(CLEAR_LOG, chat_id, "history_deleted")
        return len(doomed)

    def _message_at(self, chat_id: str, seq: int) -> Row:
        row = self._by_seq[chat_id].get(seq)
        if row is None:
            raise MessageNotFound(chat_id, seq)
        return row

    @staticmethod
    def _bump(chat: Row, now: str) -> None:
        chat.update(last_provider_state=None, version=chat["version"] + 1, updated_at=now)

    def _reclaim(self, chat: Row, now: str) -> None:
        turn = self._turns[chat["active_turn_id"]]
        _LOG.warning(RECLAIM_LOG,
                     chat["id"], turn["id"], chat["active_turn_expires_at"])
        for column in ("user_message_id", "assistant_message_id"):
            message = self._messages.get(turn[column]) if turn[column] else None
            if message is not None and message["status"] == _IN_PROGRESS:
                message.update(status=_ABORTED, updated_at=now)
                if message["role"] == "assistant" and message["provider_state"] is None:
                    audit = reclaimed_audit(turn["provider"], turn["model"])
                    self._grow(chat["owner"], text_bytes(audit))
                    message.update(provider_state=audit)
        if turn["status"] == _IN_PROGRESS:
            turn.update(status=_ABORTED, reason=LEASE_EXPIRED, ended_at=now)
        chat.update(active_turn_id=None, active_turn_expires_at=None)
        signal_fenced(self, turn["id"])  # its holder here stops now, not at its renewal
