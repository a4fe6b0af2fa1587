"""SQLite schema version 13: the bytes each owner stores, and the quota on them.

``storage_quota`` holds the database's one limit (``max_bytes``, NULL: none), set by
``set_storage_quota`` and enforced by every process using the file. While a quota is
set, ``owner_storage`` holds one counter per owner, ``used_bytes``: the UTF-8 bytes of
every message's parts, audit and usage columns, of its media bytes (``message_media``),
of the chat titles and of the turn-events log's batches of the owner's chats. Triggers
keep it in the transaction of every write, whichever code (or process) writes: inserts
and growing updates add, deletes (of a message, a chat, a log's trimmed batches)
subtract, so deleting all of an owner's chats brings the counter back to 0. Only the
tables' contents count, not SQLite's pages or indexes.

The triggers exist only while a quota is set: ``set_storage_quota`` creates them and
counts every owner from the rows in the same transaction, and drops them with the
quota. Without one, no write pays for counting (a trigger on ``messages`` makes SQLite
collect the rows of a multi-row write in a temporary b-tree first, and the counter's
page is one more page a turn writes), and ``storage_used`` counts from the rows.

A write the owner makes that would take the counter past the quota is undone by its own
trigger's ``RAISE(ABORT)`` (``StorageQuotaExceeded``, nothing of it written): a new user
message (a turn's begin) or its media, an edit that grows a completed message, a title
set or grown. A turn's commit, transition, abort and its event log are never refused
(the provider was paid): they may take the owner past the quota, and the next begin is
refused. The check is inside the write, so concurrent begins cannot pass it together.
"""

from __future__ import annotations

import sqlite3

from turnstate.core._errors import (
    StorageContention,
    StorageError,
    StorageQuotaExceeded,
    TurnAlreadyRecorded,
)

QUOTA_MARK = "turnstate: storage quota"
"""The message of the triggers' ``RAISE(ABORT)``."""


def _size(column: str) -> str:
    return f"coalesce(length(CAST({column} AS BLOB)), 0)"


def _message(row: str) -> str:
    return " + ".join(_size(f"{row}.{column}") for column in ("parts", "provider_state",
                                                              "usage"))


def _owner_of(chat: str) -> str:
    return f"(SELECT owner FROM chats WHERE id = {chat})"


def _add(amount: str, chat: str) -> str:
    return (f"UPDATE owner_storage SET used_bytes = used_bytes + ({amount})\n"
            f"        WHERE owner = {_owner_of(chat)};")


def _refuse(condition: str, chat: str) -> str:
    return (f"SELECT RAISE(ABORT, '{QUOTA_MARK}') WHERE {condition} AND (\n"
            "        SELECT s.used_bytes > q.max_bytes FROM storage_quota q, owner_storage s\n"
            f"        WHERE q.id = 1 AND s.owner = {_owner_of(chat)});")


_LOG_OWNER = "(SELECT chat_id FROM turns WHERE id = {row}.turn_id)"

_CHAT_BYTES = f"""(SELECT coalesce(sum({_message("m")}), 0) FROM messages m
        WHERE m.chat_id = c.id)
    + (SELECT coalesce(sum(length(d.data)), 0) FROM message_media d WHERE d.chat_id = c.id)
    + (SELECT coalesce(sum({_size("t.title")}), 0) FROM chat_titles t WHERE t.chat_id = c.id)
    + (SELECT coalesce(sum({_size("b.events")}), 0) FROM turn_event_batches b
        JOIN turns u ON u.id = b.turn_id WHERE u.chat_id = c.id)"""
"""The bytes chat ``c`` holds, counted from its rows."""

V13 = """
CREATE TABLE owner_storage (
    owner TEXT PRIMARY KEY,
    used_bytes INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;
CREATE TABLE storage_quota (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    max_bytes INTEGER CHECK (max_bytes IS NULL OR max_bytes >= 0)
);
INSERT INTO storage_quota (id, max_bytes) VALUES (1, NULL);
"""
"""Version 13 (``MIGRATIONS[12]``): the counters' and the quota's tables. The triggers
that keep the counters are created by ``set_storage_quota`` (``TRIGGERS``), and dropped
when the quota is removed: a database without a quota pays nothing on any write."""

RECOUNT = (
    "DELETE FROM owner_storage",
    f"""INSERT INTO owner_storage (owner, used_bytes)
    SELECT c.owner, coalesce(sum({_CHAT_BYTES}), 0) FROM chats c GROUP BY c.owner""",
)
COUNTED = f"SELECT coalesce(sum({_CHAT_BYTES}), 0) FROM chats c WHERE c.owner = ?"
"""An owner's bytes counted from the rows (``storage_used`` while no quota is set)."""

_TRIGGERS = f"""
CREATE TRIGGER quota_chat_new AFTER INSERT ON chats BEGIN
    INSERT OR IGNORE INTO owner_storage (owner) VALUES (NEW.owner);
END;
CREATE TRIGGER quota_chat_gone BEFORE DELETE ON chats BEGIN
    DELETE FROM chat_titles WHERE chat_id = OLD.id;
END;
CREATE TRIGGER quota_turn_gone BEFORE DELETE ON turns BEGIN
    DELETE FROM turn_event_batches WHERE turn_id = OLD.id;
END;
CREATE TRIGGER quota_message_new AFTER INSERT ON messages BEGIN
    {_add(_message("NEW"), "NEW.chat_id")}
    {_refuse("NEW.role = 'user'", "NEW.chat_id")}
END;
CREATE TRIGGER quota_message_changed AFTER UPDATE OF parts, provider_state, usage ON messages
    WHEN {_message("NEW")} != {_message("OLD")} BEGIN
    {_add(f"{_message('NEW')} - ({_message('OLD')})", "NEW.chat_id")}
    {_refuse(f"OLD.status = 'completed' AND NEW.status = 'completed' AND "
             f"{_message('NEW')} > {_message('OLD')}", "NEW.chat_id")}
END;
CREATE TRIGGER quota_message_gone AFTER DELETE ON messages BEGIN
    {_add(f"-({_message('OLD')})", "OLD.chat_id")}
END;
CREATE TRIGGER quota_media_new AFTER INSERT ON message_media BEGIN
    {_add("length(NEW.data)", "NEW.chat_id")}
    {_refuse("1", "NEW.chat_id")}
END;
CREATE TRIGGER quota_media_gone AFTER DELETE ON message_media BEGIN
    {_add("-length(OLD.data)", "OLD.chat_id")}
END;
CREATE TRIGGER quota_title_new AFTER INSERT ON chat_titles BEGIN
    {_add(_size("NEW.title"), "NEW.chat_id")}
    {_refuse("1", "NEW.chat_id")}
END;
CREATE TRIGGER quota_title_changed AFTER UPDATE OF title ON chat_titles BEGIN
    {_add(f"{_size('NEW.title')} - {_size('OLD.title')}", "NEW.chat_id")}
    {_refuse(f"{_size('NEW.title')} > {_size('OLD.title')}", "NEW.chat_id")}
END;
CREATE TRIGGER quota_title_gone AFTER DELETE ON chat_titles BEGIN
    {_add(f"-{_size('OLD.title')}", "OLD.chat_id")}
END;
CREATE TRIGGER quota_log_new AFTER INSERT ON turn_event_batches BEGIN
    {_add(_size("NEW.events"), _LOG_OWNER.format(row="NEW"))}
END;
CREATE TRIGGER quota_log_gone AFTER DELETE ON turn_event_batches BEGIN
    {_add(f"-{_size('OLD.events')}", _LOG_OWNER.format(row="OLD"))}
END;
"""
TRIGGER_NAMES = tuple(line.split()[2] for line in _TRIGGERS.splitlines()
                      if line.startswith("CREATE TRIGGER"))
TRIGGERS = tuple(f"CREATE TRIGGER{part}".strip() for part in
                 _TRIGGERS.split("CREATE TRIGGER")[1:])
"""The counting triggers, one statement each. A chat's delete drops its title, and a
turn's its log batches, before the row goes, so their triggers still find the owner (a
foreign key's cascade would run after)."""


def set_quota(conn: sqlite3.Connection, max_bytes: int | None) -> None:
    """Inside a write transaction: set the quota. A first quota creates the triggers and
    counts every owner's bytes from the rows; a change of it only sets the number (no
    recount: a server setting it at each start reads nothing); none drops them and the
    counters."""
    (before,) = conn.execute(QUOTA).fetchone()
    if before is not None and max_bytes is not None:
        conn.execute(SET_QUOTA, (max_bytes,))
        return
    for name in TRIGGER_NAMES:
        conn.execute(f"DROP TRIGGER IF EXISTS {name}")
    conn.execute(RECOUNT[0])
    if max_bytes is not None:
        for statement in TRIGGERS:
            conn.execute(statement)
        conn.execute(RECOUNT[1])
    conn.execute(SET_QUOTA, (max_bytes,))


def used(conn: sqlite3.Connection, owner: str) -> int:
    """The owner's counter while a quota is set, else its bytes counted from the rows."""
    (limit,) = conn.execute(QUOTA).fetchone()
    if limit is None:
        (counted,) = conn.execute(COUNTED, (owner,)).fetchone()
        return int(counted)
    row = conn.execute(USED, (owner,)).fetchone()
    return 0 if row is None else int(row[0])


USED = "SELECT used_bytes FROM owner_storage WHERE owner = ?"
QUOTA = "SELECT max_bytes FROM storage_quota WHERE id = 1"
SET_QUOTA = "UPDATE storage_quota SET max_bytes = ? WHERE id = 1"


_BUSY_CODES = frozenset({sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED})


def sqlite_error(exc: BaseException) -> StorageError:
    """The error-tree exception for an ``sqlite3`` error a write raised: a quota
    trigger's refusal is ``StorageQuotaExceeded``; the file still locked by another
    writer once the busy timeout ran out (``database is locked``: nothing of the write
    landed, it may be sent again) ``StorageContention``, as the server's 503 and the log
    writer's retry read it (lifecycle7); anything else a ``StorageError``."""
    if isinstance(exc, sqlite3.IntegrityError) and QUOTA_MARK in str(exc):
        return StorageQuotaExceeded(None, None)
    code = getattr(exc, "sqlite_errorcode", None)
    if isinstance(exc, sqlite3.OperationalError) and code is not None \
            and code & 0xFF in _BUSY_CODES:
        return StorageContention(f"sqlite: {exc} (another writer held the file past the "
                                 "busy timeout)")
    return StorageError(f"sqlite: {exc}")


def insert_refused(exc: sqlite3.IntegrityError, owner: str, turn_id: str) -> StorageError:
    """A begin's refused insert: the owner's quota, else a turn id already recorded."""
    if QUOTA_MARK in str(exc):
        return StorageQuotaExceeded(owner, None)
    return TurnAlreadyRecorded(turn_id)
