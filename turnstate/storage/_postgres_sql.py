"""The SQL of ``PostgresStore``: its statements, row readers, text codec and error mapping.

Each turn write is one call of a server-side function (``_postgres_schema``), so one
statement, one transaction and one round trip. The statements are public so the
storage benchmark can replay exactly them with plain asyncpg.

PostgreSQL text and ``jsonb`` cannot hold U+0000, and ``jsonb`` refuses lone
surrogates, all of which a chat can carry (SQLite and the other stores keep them). The
codec here stores those code points as U+FFFE followed by four hex digits (U+FFFE itself
too, so the mapping is reversible), and reads them back; any other text is stored as it
is. In JSON text the unrepresentable escapes (``\\u0000``, a lone ``\\udXXX``) are
rewritten the same way, inside their string, so ``jsonb`` stores a valid value.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import asyncpg

from turnstate.core._conversation import Message
from turnstate.core._errors import (
    ChatBusy,
    ChatLimitReached,
    ChatNotFound,
    CommitConflict,
    MessageChanged,
    MessageNotFound,
    StorageError,
    StorageQuotaExceeded,
    TurnKeyRecorded,
)
from turnstate.storage._lean import decode_lean_parts
from turnstate.storage._lean_message import LeanMessage
from turnstate.storage._media_apart import parts_with_media
from turnstate.storage._protocol import (
    ChatRecord,
    LeanWindow,
    MessageWindow,
    TurnRecord,
    TurnStatus,
)
from turnstate.storage._records import decode_parts, decode_path, decode_usage
from turnstate.storage._rows import (
    CHAT_COLUMNS,
    MESSAGE_COLUMNS,
    ROLES,
    STATUSES,
    TURN_COLUMNS,
)

_MARK = "\ufffe"
_MARKED = re.compile("\ufffe([0-9a-f]{4})")
_TEXT_UNSAFE = re.compile("[\x00\ufffe\ud800-\udfff]")
# A valid surrogate pair is kept, a NUL or lone surrogate escape is marked, any other
# escape (``\\\\`` included, so ``\\\\u0000`` stays text) is kept, a raw U+FFFE is marked.
_JSON_UNSAFE = re.compile(
    r"\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}"
    r"|\\u(0000|[dD][89a-fA-F][0-9a-fA-F]{2}|[fF]{3}[eE])|\\.|\ufffe"
)


def to_pg_text(text: str) -> str:
    """``text`` as PostgreSQL can store it (see the module docstring)."""
    if text.isascii() and "\x00" not in text:
        return text
    return _TEXT_UNSAFE.sub(lambda m: f"{_MARK}{ord(m.group()):04x}", text)


def from_pg_text(text: str) -> str:
    if _MARK not in text:
        return text
    return _MARKED.sub(lambda m: chr(int(m.group(1), 16)), text)


def to_pg_json(text: str) -> str:
    """JSON text as ``jsonb`` accepts it, with the same value once read back."""
    if "\\u0000" not in text and "\\ud" not in text.lower() and _MARK not in text \
            and "\\ufffe" not in text.lower():
        return text
    return _JSON_UNSAFE.sub(_mark_escape, text)


def _mark_escape(match: re.Match[str]) -> str:
    token = match.group()
    if token == _MARK:
        return f"{_MARK}fffe"
    code = match.group(1)
    return token if code is None else f"{_MARK}{code.lower()}"


def from_pg_json(text: str) -> str:
    """The inverse of ``to_pg_json`` on the text PostgreSQL renders a ``jsonb`` in."""
    if _MARK not in text:
        return text
    return _MARKED.sub(lambda m: f"\\u{m.group(1)}", text)


def opt_json(text: str | None) -> str | None:
    return None if text is None else to_pg_json(text)


def _opt_from_json(text: str | None) -> str | None:
    return None if text is None else from_pg_json(text)


def _opt_text(text: str | None) -> str | None:
    return None if text is None else from_pg_text(text)


CHAT = ", ".join(CHAT_COLUMNS)
MESSAGE = ", ".join(MESSAGE_COLUMNS)
TURN = ", ".join(TURN_COLUMNS)

# A new chat, refused (TSLIM) when its owner has $4 chats already (no bound when NULL).
INSERT_CHAT = f"SELECT {CHAT} FROM ts_create_chat($1, $2, $3, $4)"
# ``$2`` (or the last parameter) of a read is the owner to check, NULL for none: the check
# is part of the read's own WHERE clause.
_OWNED = "($2::text IS NULL OR c.owner = $2)"
SELECT_CHAT = f"SELECT {CHAT} FROM chats c WHERE c.id = $1 AND {_OWNED}"
# A page of an owner's chats: after the position ($2, $3) when $2 is given, at most $4
# (all when NULL) rows. Keyset order, the index chats_by_owner's.
LIST_CHATS = f"""SELECT {CHAT} FROM chats WHERE owner = $1
    AND ($2::timestamptz IS NULL OR (updated_at, id) < ($2, $3::text COLLATE "C"))
    ORDER BY updated_at DESC, id DESC LIMIT $4"""
# The lean reads (``storage._lean``) read ``parts`` only: the media bytes, apart in
# ``media`` (``_postgres_media``, version 14), stay on disk; the full reads read them too.
_M_LEAN = ", ".join(f"m.{name}" for name in MESSAGE_COLUMNS)
_M = f"{_M_LEAN}, m.media"
_MEDIA = len(MESSAGE_COLUMNS)
"""Where a full read's row has ``media`` (the window's count and turn follow it)."""
_T = ", ".join(f"t.{name}" for name in TURN_COLUMNS)
# Reads of a chat's rows join the chat itself: no row at all means no such chat (or not
# the owner's), one row of NULLs an empty list, in one round trip.
SELECT_HISTORY = f"""SELECT {_M} FROM chats c LEFT JOIN messages m
    ON m.chat_id = c.id AND m.status = 'completed' WHERE c.id = $1 AND {_OWNED}
    ORDER BY m.seq"""
SELECT_MESSAGES = f"""SELECT {_M} FROM chats c LEFT JOIN messages m ON m.chat_id = c.id
    WHERE c.id = $1 AND {_OWNED} ORDER BY m.seq"""
SELECT_TURN = f"SELECT {TURN} FROM turns WHERE id = $1"
# $3 is the limit, NULL for every turn (LIMIT NULL is no limit).
LIST_TURNS = f"""SELECT {_T} FROM chats c LEFT JOIN LATERAL (SELECT * FROM turns
    WHERE turns.chat_id = c.id ORDER BY turns.begun DESC LIMIT $3) t ON true
    WHERE c.id = $1 AND {_OWNED} ORDER BY t.begun DESC"""
# A window of ``load_messages``: $3 the seq to read from, $4 the limit + 1 (the extra
# row says whether more exist), each message with its turn and the chat's count, off the
# (chat_id, seq) index and turns_by_assistant_message.
_WINDOW = f"""SELECT {_M}, (SELECT count(*) FROM messages n WHERE n.chat_id = c.id), {_T}
    FROM chats c LEFT JOIN LATERAL (SELECT * FROM messages WHERE messages.chat_id = c.id
    AND messages.seq {{cmp}} $3::bigint ORDER BY messages.seq {{order}} LIMIT $4) m ON true
    LEFT JOIN turns t ON t.assistant_message_id = m.id
    WHERE c.id = $1 AND {_OWNED} ORDER BY m.seq"""
WINDOW_BEFORE = _WINDOW.format(cmp="<", order="DESC")
WINDOW_AFTER = _WINDOW.format(cmp=">", order="ASC")
# The lean reads: the same, the parts without their media bytes.
SELECT_MESSAGES_LEAN = SELECT_MESSAGES.replace(_M, _M_LEAN, 1)
WINDOW_BEFORE_LEAN = WINDOW_BEFORE.replace(_M, _M_LEAN, 1)
WINDOW_AFTER_LEAN = WINDOW_AFTER.replace(_M, _M_LEAN, 1)
# $8 (and the last parameter of a history change or a chat delete) is the owner to check.
# The take's outputs, then the chat's row as the take left it (``_postgres_begin``).
BEGIN_TURN = ("SELECT t.version, t.seq, t.expires_at, t.reclaimed_turn, "
              "t.reclaimed_expires_at, t.epoch, "
              + ", ".join(f"(t.chat).{name}" for name in CHAT_COLUMNS)
              + " FROM ts_take_turn_read($1, $2, $3, $4, $5, $6, $7, $8) t")
# The same with $9, the seq to delete from first (``_postgres_replace``).
BEGIN_TURN_REPLACING = BEGIN_TURN.replace("ts_take_turn_read($1, $2, $3, $4, $5, $6, $7, $8)",
                                          "ts_take_turn_replacing($1, $2, $3, $4, $5, $6, $7, "
                                          "$8, $9)")
# The same for a turn that runs attached (``TurnStart.attached``, ``_postgres_v17``).
BEGIN_TURN_ATTACHED = BEGIN_TURN.replace("ts_take_turn_read(", "ts_take_turn_attached(")
BEGIN_TURN_REPLACING_ATTACHED = BEGIN_TURN_REPLACING.replace("ts_take_turn_replacing(",
                                                             "ts_take_turn_replacing_attached(")
TURN_BY_KEY = """SELECT id FROM turns WHERE chat_id = $1 AND client_key = $2
    AND user_message_id IS NOT NULL"""
KEY_OF_TURN = "SELECT client_key FROM turns WHERE id = $1 AND chat_id = $2"
# A keyed turn's begin: $9 the cut or NULL, $10 attached, $11 the key (``_postgres_v18``).
BEGIN_TURN_KEYED = BEGIN_TURN.replace("ts_take_turn_read($1, $2, $3, $4, $5, $6, $7, $8)",
                                      "ts_take_turn_keyed($1, $2, $3, $4, $5, $6, $7, $8, "
                                      "$9, $10, $11)")
# The cutting begins with their ``TurnStart.expect`` checked first (``_postgres_v19``):
# $10-$12 (after a keyed begin's $11: $12-$14) the message read, $15 and $16 the key's
# holder read.
_EXPECTED = "ts_begin_expected($1, $8, $6, $9, {}) e(now), LATERAL "
BEGIN_REPLACING_EXPECTED = BEGIN_TURN_REPLACING.replace(
    "FROM ts_take_turn_replacing($1, $2, $3, $4, $5, $6,",
    "FROM " + _EXPECTED.format("$10, $11, $12, NULL, false, NULL")
    + "ts_take_turn_replacing($1, $2, $3, $4, $5, e.now,")
BEGIN_REPLACING_ATTACHED_EXPECTED = BEGIN_TURN_REPLACING_ATTACHED.replace(
    "FROM ts_take_turn_replacing_attached($1, $2, $3, $4, $5, $6,",
    "FROM " + _EXPECTED.format("$10, $11, $12, NULL, false, NULL")
    + "ts_take_turn_replacing_attached($1, $2, $3, $4, $5, e.now,")
BEGIN_KEYED_EXPECTED = BEGIN_TURN_KEYED.replace(
    "FROM ts_take_turn_keyed($1, $2, $3, $4, $5, $6,",
    "FROM " + _EXPECTED.format("$12, $13, $14, $11, $15, $16")
    + "ts_take_turn_keyed($1, $2, $3, $4, $5, e.now,")
assert "e.now" in BEGIN_REPLACING_EXPECTED and "e.now" in BEGIN_KEYED_EXPECTED
assert "e.now" in BEGIN_REPLACING_ATTACHED_EXPECTED
# $3 of a fenced write is the lease epoch (``_postgres_fence``).
RECORD_TRANSITION = "SELECT ts_record_transition_fenced($1, $2, $3, $4, $5, $6, $7)"
COMMIT_TURN = (f"SELECT {CHAT} FROM ts_commit_turn_fenced($1, $2, $3, $4, $5, $6, $7, $8, $9, "
               "$10, $11, $12)")
RENEW_LEASE = """UPDATE chats SET active_turn_expires_at =
    coalesce($4::timestamptz, clock_timestamp()) + $5::interval
    WHERE id = $1 AND active_turn_id = $2 AND lease_epoch = $3
    RETURNING active_turn_expires_at"""
ABORT_TURN = "SELECT ts_abort_turn($1, $2, $3, $4, $5, $6, $7, $8)"
ABORT_TURN_BILLED = "SELECT ts_abort_turn_billed($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)"
CHANGE_HISTORY = "SELECT ts_change_history($1, $2, $3, $4, $5, $6)"
# The same, the message at $3 expected to be $7 (id), $8 (status), $9 (``_postgres_v19``).
CHANGE_HISTORY_EXPECTED = "SELECT ts_change_history_expected($1, $2, $3, $4, $5, $6, $7, $8, $9)"
DELETE_CHAT = "SELECT ts_delete_chat($1, $2, $3)"
RECLAIM_EXPIRED = "SELECT chat_id, turn_id, expires_at FROM ts_reclaim_expired($1)"
"""The store's statements, each one round trip (the benchmark replays them raw)."""

SERVER_ERRORS = {"TSNFC", "TSBSY", "TSCNF", "TSNFM", "TSLIM", "TSQTA", "TSKEY", "TSMCH"}


def chat_from_pg(row: asyncpg.Record | Sequence[Any]) -> ChatRecord:
    return ChatRecord(
        id=from_pg_text(row[0]), owner=from_pg_text(row[1]), created_at=row[2],
        updated_at=row[3], version=row[4], last_provider_state=_opt_from_json(row[5]),
        last_context_state=_opt_from_json(row[6]), active_turn_id=_opt_text(row[7]),
        active_turn_expires_at=row[8], committed_seq=row[9], history_chars=row[10],
    )


def message_from_pg(row: asyncpg.Record | tuple[Any, ...]) -> Message:
    usage = row[7]
    return Message(
        id=from_pg_text(row[0]), chat_id=from_pg_text(row[1]), seq=row[2],
        role=ROLES[row[3]], status=STATUSES[row[4]],
        parts=decode_parts(from_pg_json(row[5])) if row[_MEDIA] is None
        else parts_with_media(from_pg_json(row[5]), row[_MEDIA]),
        provider_state=_opt_from_json(row[6]),
        usage=None if usage is None else decode_usage(from_pg_json(usage)),
        created_at=row[8], updated_at=row[9],
    )


def lean_message_from_pg(row: asyncpg.Record | tuple[Any, ...]) -> LeanMessage:
    """``message_from_pg`` of a lean read's row (``_M_LEAN``)."""
    usage = row[7]
    return LeanMessage(
        id=from_pg_text(row[0]), chat_id=from_pg_text(row[1]), seq=row[2],
        role=ROLES[row[3]], status=STATUSES[row[4]],
        parts=decode_lean_parts(from_pg_json(row[5])), provider_state=_opt_from_json(row[6]),
        usage=None if usage is None else decode_usage(from_pg_json(usage)),
        created_at=row[8], updated_at=row[9],
    )


def window_from_pg(rows: list[asyncpg.Record], chat_id: str, limit: int, *,
                   after: bool) -> MessageWindow:
    """The window of ``WINDOW_BEFORE`` / ``WINDOW_AFTER`` rows (oldest first)."""
    shown, more, total, turns = _window_rows(rows, chat_id, limit, after=after,
                                             width=_MEDIA + 1)
    return MessageWindow(messages=[message_from_pg(row) for row in shown], more=more,
                         total=total, turns=turns)


def lean_window_from_pg(rows: list[asyncpg.Record], chat_id: str, limit: int, *,
                        after: bool) -> LeanWindow:
    """The window of ``WINDOW_BEFORE_LEAN`` / ``WINDOW_AFTER_LEAN`` rows (oldest first)."""
    shown, more, total, turns = _window_rows(rows, chat_id, limit, after=after,
                                             width=len(MESSAGE_COLUMNS))
    return LeanWindow(messages=[lean_message_from_pg(row) for row in shown], more=more,
                      total=total, turns=turns)


def _window_rows(rows: list[asyncpg.Record], chat_id: str, limit: int, *, after: bool,
                 width: int) -> tuple[list[tuple[Any, ...]], bool, int, list[TurnRecord]]:
    """``width``: the message's columns in a row (the full read's have ``media`` too)."""
    if not rows:
        raise ChatNotFound(chat_id)
    total = rows[0][width]
    found = [tuple(row) for row in rows if row[0] is not None]
    shown = found[:limit] if after else found[-limit:]
    return shown, len(found) > limit, total, [
        turn_from_pg(row[width + 1:]) for row in shown if row[width + 1] is not None]


def turn_from_pg(row: asyncpg.Record | tuple[Any, ...]) -> TurnRecord:
    return TurnRecord(
        id=from_pg_text(row[0]), chat_id=from_pg_text(row[1]), user_seq=row[4],
        assistant_seq=row[5], status=TurnStatus(row[6]), provider=from_pg_text(row[7]),
        model=from_pg_text(row[8]), strategy=_opt_text(row[9]), reason=_opt_text(row[10]),
        detail=_opt_text(row[11]), path=decode_path(from_pg_json(row[12])),
        started_at=row[13], ended_at=row[14],
        assistant_message_id=None if row[3] is None else from_pg_text(row[3]),
    )


def server_error(exc: asyncpg.PostgresError, chat_id: str, base_version: int,
                 seq: int) -> Exception:
    """The error-tree exception for one of the functions' own refusals."""
    code, detail = exc.sqlstate, getattr(exc, "detail", None) or ""
    if code == "TSNFC":
        return ChatNotFound(chat_id)
    if code == "TSBSY":
        return ChatBusy(chat_id, from_pg_text(detail))
    if code == "TSCNF":
        return CommitConflict(chat_id, base_version, int(detail))
    if code == "TSNFM":
        return MessageNotFound(chat_id, seq)
    if code == "TSLIM":  # the caller names the owner (``PostgresStore.create_chat``)
        return ChatLimitReached("", int(detail))
    if code == "TSQTA":  # ``_postgres_quota``
        return StorageQuotaExceeded(None, None)
    if code == "TSMCH":  # ``_postgres_v19``: the message at ``seq`` is another
        return MessageChanged(chat_id, seq, from_pg_text(detail))
    if code == "TSKEY":  # ``_postgres_v18``: the begin names its key (``begin_turn``)
        return TurnKeyRecorded(chat_id, "", from_pg_text(detail))
    return StorageError(f"postgres: {exc}")
