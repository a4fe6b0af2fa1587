"""The SQL of ``SqliteStore``: its statements and the small steps run on its writer thread.

Every function here takes the ``sqlite3`` connection and runs inside a transaction the
store opened (or a plain read); none awaits. The statements are public so the storage
benchmark can replay exactly them with plain ``sqlite3``.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from turnstate.core._conversation import Message
from turnstate.core._errors import (
    ChatNotFound,
    CommitConflict,
    StorageError,
)
from turnstate.storage._commit_columns import CommitColumns
from turnstate.storage._lean import lean_message_from_row
from turnstate.storage._lean_message import LeanMessage
from turnstate.storage._protocol import (
    ChatPosition,
    ChatRecord,
    LeanWindow,
    MessageWindow,
    TurnLease,
    TurnRecord,
)
from turnstate.storage._reclaimed import LEASE_RECLAIMED, reclaimed_audit
from turnstate.storage._records import LEASE_EXPIRED, answer_turn_id, format_ts, message_ids
from turnstate.storage._rows import (
    CHAT_COLUMNS,
    MESSAGE_COLUMNS,
    TURN_COLUMNS,
    chat_from_row,
    turn_from_row,
)
from turnstate.storage._sqlite_media import with_media
from turnstate.storage._window import SEQ_BOUND, held_seq

Conn = sqlite3.Connection

CHAT = ", ".join(CHAT_COLUMNS)
MESSAGE = ", ".join(MESSAGE_COLUMNS)
TURN = ", ".join(TURN_COLUMNS)

SELECT_CHAT = f"SELECT {CHAT} FROM chats WHERE id = ?"
SELECT_FOR_BEGIN = f"""SELECT (SELECT coalesce(max(seq), 0) FROM messages WHERE chat_id = ?),
    lease_epoch, {CHAT} FROM chats WHERE id = ?"""
"""The chat's last seq, its lease epoch and its row: begin builds the chat as its own
writes leave it (no ``RETURNING``, whose rows SQLite collects in a temporary b-tree)."""
TURN_RECORDED = "SELECT 1 FROM turns WHERE id = ?"
"""Whether a turn id is taken: a begin that replaces checks it before the cut's
``MessageNotFound`` (an insert would find it only after). The turn's primary key alone,
as the insert's own check: a message's id is its turn's id and a suffix, unique as that
(schema version 7 has no index on a message's id, so a lookup by it scanned every
message of the file, on the event loop's thread)."""
INSERT_MESSAGES = f"""INSERT INTO messages ({MESSAGE}) VALUES
    (?, ?, ?, 'user', 'in_progress', ?, NULL, NULL, ?, ?),
    (?, ?, ?, 'assistant', 'in_progress', '[]', NULL, NULL, ?, ?)"""
INSERT_TURN = """INSERT INTO turns (id, chat_id, user_message_id, assistant_message_id,
    user_seq, assistant_seq, status, provider, model, path, started_at)
    VALUES (?, ?, ?, ?, ?, ?, 'in_progress', ?, ?, '[]', ?)"""
INSERT_TURN_ATTACHED = INSERT_TURN.replace("started_at)", "started_at, attached)").replace(
    "'[]', ?)", "'[]', ?, 1)")
"""``INSERT_TURN`` of a turn begun attached (``TurnStart.attached``, schema version 14);
a detached turn's begin leaves the column to its default, 0."""
TAKE_LEASE = """UPDATE chats SET active_turn_id = ?, active_turn_expires_at = ?, updated_at = ?,
    lease_epoch = ? WHERE id = ?"""
# The fence: a lease's writes match the chat's turn and epoch in their own WHERE clause.
RENEW_LEASE = """UPDATE chats SET active_turn_expires_at = ?
    WHERE id = ? AND active_turn_id = ? AND lease_epoch = ?"""
RELEASE_HELD = """UPDATE chats SET active_turn_id = NULL, active_turn_expires_at = NULL,
    updated_at = ? WHERE id = ? AND active_turn_id = ?"""
# A turn's messages are found by their chat and seq (``UNIQUE (chat_id, seq)``), their
# ids checked as well: schema version 7 has no index on a message's id.
SELECT_TURN_SEQS = """SELECT chat_id, user_seq, assistant_seq, provider, model FROM turns
    WHERE id = ?"""
MARK_RECLAIMED = """UPDATE messages SET provider_state = ?
    WHERE chat_id = ? AND seq = ? AND id = ? AND status = 'in_progress'
    AND provider_state IS NULL"""
BILL_RECLAIMED = f"""UPDATE messages SET usage = coalesce(?, usage), provider_state = ?
    WHERE chat_id = ? AND seq = ? AND id = ? AND status = 'aborted'
    AND CASE WHEN json_valid(provider_state)
        THEN json_extract(provider_state, '$.metadata.{LEASE_RECLAIMED}') IS 1 END"""
"""A lease-lost turn's bill over its reclaimed answer's marker, once (``_reclaimed``)."""
RECLAIM_MESSAGES = """UPDATE messages SET status = 'aborted', updated_at = ?
    WHERE chat_id = ? AND seq IN (?, ?) AND id IN (?, ?) AND status = 'in_progress'"""
RECLAIM_TURN = f"""UPDATE turns SET status = 'aborted', reason = '{LEASE_EXPIRED}', ended_at = ?
    WHERE id = ? AND status = 'in_progress'"""
RELEASE_LEASE = """UPDATE chats SET active_turn_id = NULL, active_turn_expires_at = NULL,
    updated_at = ? WHERE id = ?"""
SELECT_FOR_TRANSITION = """SELECT c.version, c.active_turn_id, m.status, m.parts, c.lease_epoch
    FROM chats c LEFT JOIN messages m ON m.chat_id = c.id AND m.seq = ? AND m.id = ?
    WHERE c.id = ?"""
SET_PARTS = "UPDATE messages SET parts = ?, updated_at = ? WHERE chat_id = ? AND seq = ?"
CLEAR_CURSOR = "UPDATE chats SET last_provider_state = NULL, updated_at = ? WHERE id = ?"
SELECT_USER_PARTS = """SELECT parts FROM messages WHERE chat_id = ? AND seq = ? AND id = ?
    AND status = 'in_progress'"""
_COMMIT_CHAT = """UPDATE chats SET last_provider_state = ?, last_context_state = ?,
    active_turn_id = NULL, active_turn_expires_at = NULL, version = version + 1,
    committed_seq = ?, history_chars = history_chars + ?,
    updated_at = ? WHERE id = ? AND version = ? AND active_turn_id = ? AND lease_epoch = ?"""
COMMIT_CHAT = f"{_COMMIT_CHAT}\n    RETURNING {CHAT}"
"""The guarded chat update (the version and lease check: no row, no commit), returning
the chat as it leaves it."""
COMMIT_LEASED_CHAT = f"{_COMMIT_CHAT} AND history_chars = ?"
"""The same update for a lease that carries the chat begin left (``TurnLease.chat``),
its ``history_chars`` checked as well: the chat is then that record with the columns the
commit sets (``_rows.committed_chat``; the others, ``id``, ``owner`` and ``created_at``, no
statement changes), instead of ``RETURNING``'s rows, which SQLite collects in a
temporary b-tree. No row: the store runs ``COMMIT_CHAT``, which decides."""
COMMIT_MESSAGES = """UPDATE messages SET status = 'completed', updated_at = ?,
    parts = CASE WHEN id = ? THEN ? ELSE parts END,
    provider_state = CASE WHEN id = ? THEN ? ELSE provider_state END,
    usage = CASE WHEN id = ? THEN ? ELSE usage END
    WHERE chat_id = ? AND seq BETWEEN ? AND ? AND id IN (?, ?) AND status = 'in_progress'"""
"""Both messages completed by one statement (``commit_messages``). A turn's two seqs are
adjacent (begin takes ``seq`` and ``seq + 1``): a range of the ``(chat_id, seq)`` index,
where ``seq IN (?, ?)`` built a temporary b-tree of the two values first."""
COMMIT_TURN = """UPDATE turns SET status = 'completed', strategy = ?, path = ?, ended_at = ?
    WHERE id = ?"""
ABORT_USER = """UPDATE messages SET status = 'aborted', updated_at = ?
    WHERE chat_id = ? AND seq = ? AND id = ? AND status = 'in_progress'"""
ABORT_ASSISTANT = """UPDATE messages SET status = 'aborted', parts = coalesce(?, parts),
    usage = coalesce(?, usage), provider_state = coalesce(?, provider_state),
    updated_at = ? WHERE chat_id = ? AND seq = ? AND id = ? AND status = 'in_progress'"""
ABORT_TURN = """UPDATE turns SET status = 'aborted', reason = ?, detail = ?,
    strategy = coalesce(?, strategy), path = ?, ended_at = ?
    WHERE id = ? AND status = 'in_progress'"""
BUMP = """UPDATE chats SET last_provider_state = NULL, version = version + 1, updated_at = ?
    WHERE id = ?"""
"""The statements of the turn transactions (the benchmark replays them with sqlite3)."""


# A cursor turn's two writes, each one statement that is its own transaction (no BEGIN or
# COMMIT statement: SQLite's autocommit, the statement's writes all or nothing): an
# ``INSERT`` into a view of the connection's temporary schema, whose ``INSTEAD OF``
# trigger runs the transaction's statements. A trigger's ``RAISE(ABORT)`` undoes the
# whole statement: a check that fails writes nothing, and the store then runs the
# transaction of separate statements above, which decides (issue 26).
_COMMIT_COLUMNS = ("chat_id", "version", "turn_id", "epoch", "history_chars", "chars",
                   "provider_state", "context", "user_seq", "assistant_seq", "user_id",
                   "assistant_id", "parts", "audit", "usage", "strategy", "path", "now")
_BEGIN_COLUMNS = ("chat_id", "turn_id", "seq", "user_parts", "now", "user_id",
                  "assistant_id", "provider", "model", "expires", "epoch", "version",
                  "provider_state", "context", "committed_seq", "history_chars")


def _view(name: str, columns: tuple[str, ...]) -> str:
    return (f"CREATE TEMP VIEW {name} AS SELECT "
            + ", ".join(f"NULL AS {column}" for column in columns))


def _insert(name: str, columns: tuple[str, ...]) -> str:
    return (f"INSERT INTO temp.{name} ({', '.join(columns)}) VALUES "
            f"({', '.join('?' * len(columns))})")


TURN_WRITES: tuple[str, ...] = (
    _view("turn_commits", _COMMIT_COLUMNS),
    """CREATE TEMP TRIGGER turn_commits_write INSTEAD OF INSERT ON turn_commits BEGIN
    UPDATE chats SET last_provider_state = NEW.provider_state,
        last_context_state = NEW.context, active_turn_id = NULL,
        active_turn_expires_at = NULL, version = version + 1,
        committed_seq = NEW.assistant_seq, history_chars = history_chars + NEW.chars,
        updated_at = NEW.now WHERE id = NEW.chat_id AND version = NEW.version
        AND active_turn_id = NEW.turn_id AND lease_epoch = NEW.epoch
        AND history_chars = NEW.history_chars;
    SELECT RAISE(ABORT, 'turnstate: the chat is not the one the lease holds')
        WHERE changes() = 0;
    UPDATE messages SET status = 'completed', updated_at = NEW.now,
        parts = CASE WHEN id = NEW.assistant_id THEN NEW.parts ELSE parts END,
        provider_state = CASE WHEN id = NEW.assistant_id THEN NEW.audit
            ELSE provider_state END,
        usage = CASE WHEN id = NEW.assistant_id THEN NEW.usage ELSE usage END
        WHERE chat_id = NEW.chat_id AND seq BETWEEN NEW.user_seq AND NEW.assistant_seq
        AND id IN (NEW.user_id, NEW.assistant_id) AND status = 'in_progress';
    SELECT RAISE(ABORT, 'turnstate: the turn''s messages moved') WHERE changes() != 2;
    UPDATE turns SET status = 'completed', strategy = NEW.strategy, path = NEW.path,
        ended_at = NEW.now WHERE id = NEW.turn_id;
END""",
    _view("turn_begins", _BEGIN_COLUMNS),
    f"""CREATE TEMP TRIGGER turn_begins_write INSTEAD OF INSERT ON turn_begins BEGIN
    UPDATE chats SET active_turn_id = NEW.turn_id, active_turn_expires_at = NEW.expires,
        updated_at = NEW.now, lease_epoch = NEW.epoch
        WHERE id = NEW.chat_id AND active_turn_id IS NULL AND lease_epoch = NEW.epoch - 1
        AND version = NEW.version AND last_provider_state IS NEW.provider_state
        AND last_context_state IS NEW.context AND committed_seq IS NEW.committed_seq
        AND history_chars = NEW.history_chars;
    SELECT RAISE(ABORT, 'turnstate: the chat is not the one the store wrote last')
        WHERE changes() = 0 OR (SELECT coalesce(max(seq), 0) FROM messages
            WHERE chat_id = NEW.chat_id) != NEW.seq - 1;
    INSERT INTO messages ({MESSAGE}) VALUES
        (NEW.user_id, NEW.chat_id, NEW.seq, 'user', 'in_progress', NEW.user_parts, NULL,
         NULL, NEW.now, NEW.now);
    INSERT INTO messages ({MESSAGE}) VALUES
        (NEW.assistant_id, NEW.chat_id, NEW.seq + 1, 'assistant', 'in_progress', '[]',
         NULL, NULL, NEW.now, NEW.now);
    INSERT INTO turns (id, chat_id, user_message_id, assistant_message_id, user_seq,
        assistant_seq, status, provider, model, path, started_at)
        VALUES (NEW.turn_id, NEW.chat_id, NEW.user_id, NEW.assistant_id, NEW.seq,
        NEW.seq + 1, 'in_progress', NEW.provider, NEW.model, '[]', NEW.now);
END""",
)
TURN_WRITES += tuple(  # begin's view and trigger for a turn begun attached (version 14)
    statement.replace("turn_begins", "turn_begins_attached")
    .replace("path, started_at)", "path, started_at, attached)")
    .replace("NEW.now);\nEND", "NEW.now, 1);\nEND")
    for statement in TURN_WRITES[-2:])
"""The temporary views and triggers of the one-statement writes (``configure`` creates
them on every writable connection: they live in the connection's temporary schema, so
the file's schema, and every other process's view of it, stays as it was). Begin's trigger
inserts its two messages one row at a time: a trigger's multi-row ``VALUES`` is first
copied into a temporary b-tree, opened and closed each time (about 23K instructions a
turn, issue 26). A detached turn's begin leaves ``turns.attached`` to its default (0),
so a file not yet at version 14 (a test's) still takes it."""
COMMIT_KNOWN = _insert("turn_commits", _COMMIT_COLUMNS)
"""A commit of a lease that carries begin's chat, in one statement: the guarded chat
update of ``COMMIT_LEASED_CHAT``, both messages as ``COMMIT_MESSAGES`` (both or the
statement is undone), the turn as ``COMMIT_TURN``."""
BEGIN_KNOWN = _insert("turn_begins", _BEGIN_COLUMNS)
BEGIN_KNOWN_ATTACHED = _insert("turn_begins_attached", _BEGIN_COLUMNS)
"""A begin on a chat whose row the store knows (it wrote it last: its creation or the
commit before), in one statement: the lease is taken (as ``TAKE_LEASE``) only while the
chat is not leased, its lease epoch is the one the store knows and every column begin
hands over unchanged (``version``, both states, both counters) still holds what the store
wrote, and no message has a seq past the one it knows; then both messages and the turn,
as ``INSERT_MESSAGES`` and ``INSERT_TURN``. (``updated_at`` is not checked: begin sets it.)
``BEGIN_KNOWN_ATTACHED`` is the same for a turn begun attached (``INSERT_TURN_ATTACHED``)."""


def commit_messages(conn: Conn, cols: CommitColumns, now: str, *, chat_id: str,
                    seqs: tuple[int, int], ids: tuple[str, str]) -> int:
    """Complete the turn's two messages, user's and assistant's at ``seqs`` (adjacent)
    with ``ids`` (the assistant's gets its parts, state and usage), in one statement; the
    number of rows changed (two, or the commit is refused)."""
    answer = ids[1]
    changed: int = conn.execute(COMMIT_MESSAGES, (
        now, answer, cols.parts, answer, cols.audit, answer, cols.usage, chat_id, *seqs,
        *ids)).rowcount
    return changed


def configure(conn: Conn, busy_timeout_ms: int, *, wal: bool) -> None:
    conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
    conn.execute("PRAGMA foreign_keys = ON")
    if wal:
        (mode,) = conn.execute("PRAGMA journal_mode = WAL").fetchone()
        if str(mode).lower() != "wal":
            msg = f"cannot switch the database to WAL mode (journal_mode is {mode!r})"
            raise StorageError(msg)
        conn.execute("PRAGMA synchronous = NORMAL")


def create_turn_writes(conn: Conn) -> None:
    """The temporary views and triggers of ``COMMIT_KNOWN`` and ``BEGIN_KNOWN``."""
    for statement in TURN_WRITES:
        conn.execute(statement)


def read_chat(conn: Conn, chat_id: str, owner: str | None = None) -> ChatRecord:
    row = conn.execute(SELECT_CHAT, (chat_id,)).fetchone()
    if row is None or (owner is not None and row[1] != owner):
        raise ChatNotFound(chat_id)
    return chat_from_row(row)


def check_owner(conn: Conn, chat_id: str, owner: str | None) -> None:
    """``ChatNotFound`` unless the chat exists and (when ``owner`` is given) is owner's."""
    row = conn.execute("SELECT owner FROM chats WHERE id = ?", (chat_id,)).fetchone()
    if row is None or (owner is not None and row[0] != owner):
        raise ChatNotFound(chat_id)


def read_messages(conn: Conn, chat_id: str, sql: str,
                  owner: str | None = None) -> tuple[Message, ...]:
    return tuple(with_media(conn, row) for row in _message_rows(conn, chat_id, sql, owner))


def read_lean_messages(conn: Conn, chat_id: str, sql: str,
                       owner: str | None = None) -> tuple[LeanMessage, ...]:
    """``read_messages`` without the media bytes (``storage._lean``)."""
    return tuple(lean_message_from_row(row)
                 for row in _message_rows(conn, chat_id, sql, owner))


def _message_rows(conn: Conn, chat_id: str, sql: str, owner: str | None) -> list[Any]:
    if owner is not None:
        check_owner(conn, chat_id, owner)
    rows = conn.execute(sql, (chat_id,)).fetchall()
    if not rows and owner is None:
        read_chat(conn, chat_id)  # an empty history, or no such chat
    return rows


# ``load_messages``: ``limit + 1`` rows off the (chat_id, seq) index, the extra one saying
# whether more exist; the chat's count; the window's turns by their primary key (an
# answer's id is its turn's id and ``:assistant``; schema version 6 has no index on
# ``assistant_message_id``), those whose answer is still in the window.
WINDOW_BEFORE = (f"SELECT {MESSAGE} FROM messages WHERE chat_id = ? AND seq < ? "
                 "ORDER BY seq DESC LIMIT ?")
WINDOW_AFTER = f"SELECT {MESSAGE} FROM messages WHERE chat_id = ? AND seq > ? ORDER BY seq LIMIT ?"
COUNT_MESSAGES = "SELECT count(*) FROM messages WHERE chat_id = ?"
WINDOW_TURNS = (f"SELECT {TURN} FROM turns WHERE id IN ({{turns}}) "
                "AND assistant_message_id IN ({answers})")


def read_window(conn: Conn, chat_id: str, *, limit: int, before_seq: int | None,
                after_seq: int | None, owner: str | None) -> MessageWindow:
    """One window of ``load_messages``, oldest first."""
    rows, more, total, turns = _window_rows(conn, chat_id, limit=limit, before_seq=before_seq,
                                            after_seq=after_seq, owner=owner)
    return MessageWindow(messages=tuple(with_media(conn, row) for row in rows), more=more,
                         total=total, turns=turns)


def read_lean_window(conn: Conn, chat_id: str, *, limit: int, before_seq: int | None,
                     after_seq: int | None, owner: str | None) -> LeanWindow:
    """``read_window`` without the media bytes (``storage._lean``)."""
    rows, more, total, turns = _window_rows(conn, chat_id, limit=limit, before_seq=before_seq,
                                            after_seq=after_seq, owner=owner)
    return LeanWindow(messages=tuple(lean_message_from_row(row) for row in rows), more=more,
                      total=total, turns=turns)


def _window_rows(conn: Conn, chat_id: str, *, limit: int, before_seq: int | None,
                 after_seq: int | None, owner: str | None
                 ) -> tuple[list[Any], bool, int, tuple[TurnRecord, ...]]:
    check_owner(conn, chat_id, owner)
    if after_seq is not None:
        rows = conn.execute(WINDOW_AFTER, (chat_id, held_seq(after_seq), limit + 1)).fetchall()
    else:
        bound = SEQ_BOUND if before_seq is None else held_seq(before_seq)
        rows = conn.execute(WINDOW_BEFORE, (chat_id, bound, limit + 1)).fetchall()[::-1]
    more, rows = len(rows) > limit, (rows[:limit] if after_seq is not None else rows[-limit:])
    (total,) = conn.execute(COUNT_MESSAGES, (chat_id,)).fetchone()
    owners = [(turn_id, row[0]) for row in rows
              if (turn_id := answer_turn_id(row[0])) is not None]
    turn_ids, answers = [pair[0] for pair in owners], [pair[1] for pair in owners]
    turns = conn.execute(WINDOW_TURNS.format(
        turns=", ".join("?" * len(answers)), answers=", ".join("?" * len(answers))),
        turn_ids + answers).fetchall() if answers else []
    return rows, more, total, tuple(turn_from_row(row) for row in turns)


def list_chats_query(owner: str, limit: int | None,
                     after: ChatPosition | None) -> tuple[str, tuple[Any, ...]]:
    """The statement and parameters of one page of ``list_chats``."""
    where, params = "owner = ?", [owner]
    if after is not None:
        where += " AND (updated_at < ? OR (updated_at = ? AND id < ?))"
        mark = format_ts(after.updated_at)
        params += [mark, mark, after.id]
    sql = f"SELECT {CHAT} FROM chats WHERE {where} ORDER BY updated_at DESC, id DESC LIMIT ?"
    return sql, (*params, -1 if limit is None else limit)


def reclaim_turn(conn: Conn, turn_id: str, now: str) -> None:
    found = conn.execute(SELECT_TURN_SEQS, (turn_id,)).fetchone()
    if found is not None:
        chat_id, user_seq, assistant_seq, provider, model = found
        user_id, assistant_id = message_ids(turn_id)
        conn.execute(MARK_RECLAIMED, (reclaimed_audit(provider, model), chat_id,
                                      assistant_seq, assistant_id))
        conn.execute(RECLAIM_MESSAGES, (now, chat_id, user_seq, assistant_seq, user_id,
                                        assistant_id))
    conn.execute(RECLAIM_TURN, (now, turn_id))


def conflict_for(conn: Conn, lease: TurnLease) -> Exception:
    found = conn.execute("SELECT version FROM chats WHERE id = ?", (lease.chat_id,)).fetchone()
    if found is None:
        return ChatNotFound(lease.chat_id)
    return CommitConflict(lease.chat_id, lease.base_version, found[0])


def bump_version(conn: Conn, chat_id: str, now: str, owner: str | None = None) -> None:
    if owner is not None:
        check_owner(conn, chat_id, owner)
    if conn.execute(BUMP, (now, chat_id)).rowcount != 1:
        raise ChatNotFound(chat_id)
