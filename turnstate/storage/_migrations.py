"""SQLite schema migrations: an ordered list, applied at open, each recorded once.

``MIGRATIONS[i]`` creates schema version ``i + 1``. ``migrate`` applies the missing ones
in order, each in its own ``BEGIN IMMEDIATE`` transaction together with its row in
``schema_migrations``, and re-reads the version inside that transaction, so two
processes opening the same file at once never apply a migration twice. A migration is
never edited once released: a change is a new entry at the end.

Version 1 is the schema of DESIGN.md section 4; version 2 adds the ``turns`` audit table
(each turn's strategy, outcome and state path, for ``turnstate inspect`` and diagrams)
and the indexes the store's queries use; version 3 adds the chat's ``committed_seq`` and
``history_chars`` counters (``_protocol``), so a cursor turn never reads the history;
version 4 adds the chat's ``lease_epoch``, the fencing token every turn write checks.
Version 5, the turn-events log (``_turn_log``), adds ``turn_logs`` (one header row per
logged turn: the highest event id, truncation, expiry, a stop request) and
``turn_events``; both follow their turn when its chat is deleted.

Version 6 (issue 26) rebuilds ``turns`` without its two foreign keys to ``messages``
and so without the two indexes those keys needed (``turns_by_user_message``,
``turns_by_assistant_message``): every begin wrote an entry at a random place in each, two
of the about nineteen pages a cursor turn wrote. What the keys did is kept: a trigger
sets a deleted message's id to NULL on its turn, finding the turn by its primary key (a
message's id is its turn's id and ``:user`` or ``:assistant``, ``_records.message_ids``),
and the chat view finds a window's turns the same way. Rows keep their rowids (the order
``list_turns`` reads). A rebuild runs with foreign keys off (``_REBUILDS``), as SQLite
documents for changing a table's constraints: dropping the old table must not cascade
to the turns' logs.

Version 7 (issue 26) rebuilds ``messages`` without the primary key on ``id``, whose
index took an entry at a random place per message (two per begin): the store finds a
turn's messages by ``(chat_id, seq)``, which the lease carries, and checks their ids as
well. The ids stay unique as the turn ids they are made of (``_records.message_ids``;
``turns.id`` is the primary key), which the schema no longer checks on its own. Rows keep
their rowids, the trigger of version 6 is created again (it goes with the old table).

Version 8 (issue 26) stores the turn-events log one row per write of a turn, not one
per event: ``turn_event_batches`` holds a batch's first and last event ids and its events
as one JSON array (``_sqlite_log``), keyed by ``(turn_id, last_id)`` and deleted with its
turn; a ``turn_logs`` header row is written only for a truncation, a stop request or an
expiry, no longer by every append. Existing events move over one row each;
``turn_events`` is dropped.

Version 9 (issue 26) rebuilds ``messages`` and ``turns`` with their status checks
written as three comparisons (``status = 'in_progress' OR ...``) instead of ``status IN
('in_progress', 'completed', 'aborted')``: the same rule, but SQLite evaluates a CHECK's
``IN`` list of more than two constants by building a temporary b-tree of the list, every
time a row's status is written (six times a cursor turn). Both tables are rebuilt from
version 7's and version 6's scripts (messages first: its trigger names ``turns`` and goes
with it, and is created again last); rows keep their rowids. Version 10 adds the chats'
titles; version 11 the lease clock's offset per boot (``_lease_clock``); version 12
(``_sqlite_media``) keeps a message's media bytes in ``message_media``, apart from its
parts; version 13 (``_sqlite_quota``) counts the bytes each owner stores; version 14 marks
the turns that run attached (``turns.attached``, lifecycle7); version 15 a turn's client
key (``turns.client_key``, ``_sqlite_keys``).

A version may also have a Python backfill, run in the same transaction after its SQL:
version 3 counts ``history_chars`` in Python, because SQLite's ``length()`` stops at the
first NUL and the count must equal ``part_chars`` exactly; version 12 decodes the
stored base64 into ``message_media`` (SQLite has no base64 decoder).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

from turnstate.core._errors import StorageError
from turnstate.storage._commit_columns import stored_chars
from turnstate.storage._sqlite_keys import V15
from turnstate.storage._sqlite_media import V12, set_media_apart
from turnstate.storage._sqlite_quota import V13

_BOOTSTRAP = "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY)"

# Stored provider states never hold a stateless-loop mode or loop messages: the stores
# refuse them in code, and these checks refuse them again for any writer of the file.
_NO_LOOP_STATE = """({column} IS NULL OR (instr({column}, '"stateless-loop"') = 0
        AND instr({column}, '"loopMessages"') = 0))"""

_V1 = f"""
CREATE TABLE chats (
    id TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    version INTEGER NOT NULL DEFAULT 0 CHECK (version >= 0),
    last_provider_state TEXT CHECK {_NO_LOOP_STATE.format(column="last_provider_state")},
    last_context_state TEXT,
    active_turn_id TEXT,
    active_turn_expires_at TEXT,
    CHECK ((active_turn_id IS NULL) = (active_turn_expires_at IS NULL))
);
CREATE TABLE messages (
    id TEXT PRIMARY KEY,
    chat_id TEXT NOT NULL REFERENCES chats (id),
    seq INTEGER NOT NULL CHECK (seq > 0),
    role TEXT NOT NULL CHECK (role IN ('user', 'assistant')),
    status TEXT NOT NULL CHECK (status IN ('in_progress', 'completed', 'aborted')),
    parts TEXT NOT NULL,
    provider_state TEXT CHECK {_NO_LOOP_STATE.format(column="provider_state")},
    usage TEXT,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    UNIQUE (chat_id, seq)
);
"""

_V2 = """
CREATE TABLE turns (
    id TEXT PRIMARY KEY,
    chat_id TEXT NOT NULL REFERENCES chats (id),
    user_message_id TEXT REFERENCES messages (id) ON DELETE SET NULL,
    assistant_message_id TEXT REFERENCES messages (id) ON DELETE SET NULL,
    user_seq INTEGER NOT NULL,
    assistant_seq INTEGER NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('in_progress', 'completed', 'aborted')),
    provider TEXT NOT NULL,
    model TEXT NOT NULL,
    strategy TEXT,
    reason TEXT,
    detail TEXT,
    path TEXT NOT NULL DEFAULT '[]',
    started_at TEXT NOT NULL,
    ended_at TEXT
);
CREATE INDEX turns_by_chat ON turns (chat_id);
CREATE INDEX turns_by_user_message ON turns (user_message_id);
CREATE INDEX turns_by_assistant_message ON turns (assistant_message_id);
CREATE INDEX chats_by_owner ON chats (owner, updated_at);
CREATE INDEX chats_by_lease_expiry ON chats (active_turn_expires_at)
    WHERE active_turn_id IS NOT NULL;
"""

_V3 = """
ALTER TABLE chats ADD COLUMN committed_seq INTEGER;
ALTER TABLE chats ADD COLUMN history_chars INTEGER NOT NULL DEFAULT 0
    CHECK (history_chars >= 0);
UPDATE chats SET committed_seq = (SELECT max(seq) FROM messages
    WHERE messages.chat_id = chats.id AND messages.status = 'completed');
"""


def _count_history_chars(conn: sqlite3.Connection) -> None:
    totals: dict[str, int] = {}
    for chat_id, parts in conn.execute(
            "SELECT chat_id, parts FROM messages WHERE status = 'completed'"):
        try:
            chars = stored_chars(parts)
        except StorageError:  # an unreadable row: the estimate leaves it out, as reads fail
            chars = 0
        totals[chat_id] = totals.get(chat_id, 0) + chars
    conn.executemany("UPDATE chats SET history_chars = ? WHERE id = ?",
                     [(chars, chat_id) for chat_id, chars in totals.items()])


_V4 = """
ALTER TABLE chats ADD COLUMN lease_epoch INTEGER NOT NULL DEFAULT 0 CHECK (lease_epoch >= 0);
"""

_TURN_LOG = """
CREATE TABLE turn_logs (
    turn_id TEXT PRIMARY KEY REFERENCES turns (id) ON DELETE CASCADE,
    last_id INTEGER NOT NULL DEFAULT 0 CHECK (last_id >= 0),
    truncated INTEGER NOT NULL DEFAULT 0 CHECK (truncated IN (0, 1)),
    expired INTEGER NOT NULL DEFAULT 0 CHECK (expired IN (0, 1)),
    stop_requested_at TEXT
);
CREATE INDEX turn_logs_unexpired ON turn_logs (turn_id) WHERE expired = 0;
CREATE TABLE turn_events (
    turn_id TEXT NOT NULL REFERENCES turn_logs (turn_id) ON DELETE CASCADE,
    id INTEGER NOT NULL CHECK (id > 0),
    type TEXT NOT NULL,
    data TEXT NOT NULL,
    PRIMARY KEY (turn_id, id)
) WITHOUT ROWID;
"""

_TURN_COLUMNS = """id, chat_id, user_message_id, assistant_message_id, user_seq, assistant_seq,
    status, provider, model, strategy, reason, detail, path, started_at, ended_at"""


def _turn_of(message_id: str, suffix: str) -> str:
    """SQL for the id of the turn whose message ``message_id`` is, by bytes (a ``TEXT``
    length stops at a NUL)."""
    raw = f"CAST({message_id} AS BLOB)"
    return f"CAST(substr({raw}, 1, length({raw}) - {len(suffix.encode())}) AS TEXT)"


_V6 = f"""
CREATE TABLE turns_v6 (
    id TEXT PRIMARY KEY,
    chat_id TEXT NOT NULL REFERENCES chats (id),
    user_message_id TEXT,
    assistant_message_id TEXT,
    user_seq INTEGER NOT NULL,
    assistant_seq INTEGER NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('in_progress', 'completed', 'aborted')),
    provider TEXT NOT NULL,
    model TEXT NOT NULL,
    strategy TEXT,
    reason TEXT,
    detail TEXT,
    path TEXT NOT NULL DEFAULT '[]',
    started_at TEXT NOT NULL,
    ended_at TEXT
);
INSERT INTO turns_v6 (rowid, {_TURN_COLUMNS}) SELECT rowid, {_TURN_COLUMNS} FROM turns;
DROP TABLE turns;
ALTER TABLE turns_v6 RENAME TO turns;
CREATE INDEX turns_by_chat ON turns (chat_id);
{{leave_turns}}
"""
_LEAVE_TURNS = f"""CREATE TRIGGER messages_leave_turns AFTER DELETE ON messages BEGIN
    UPDATE turns SET user_message_id = NULL
        WHERE id = {_turn_of("old.id", ":user")} AND user_message_id = old.id;
    UPDATE turns SET assistant_message_id = NULL
        WHERE id = {_turn_of("old.id", ":assistant")} AND assistant_message_id = old.id;
END;"""
_MESSAGE_COLUMNS = """id, chat_id, seq, role, status, parts, provider_state, usage, created_at,
    updated_at"""

_V7 = f"""
CREATE TABLE messages_v7 (
    id TEXT NOT NULL,
    chat_id TEXT NOT NULL REFERENCES chats (id),
    seq INTEGER NOT NULL CHECK (seq > 0),
    role TEXT NOT NULL CHECK (role IN ('user', 'assistant')),
    status TEXT NOT NULL CHECK (status IN ('in_progress', 'completed', 'aborted')),
    parts TEXT NOT NULL,
    provider_state TEXT CHECK {_NO_LOOP_STATE.format(column="provider_state")},
    usage TEXT,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    UNIQUE (chat_id, seq)
);
INSERT INTO messages_v7 (rowid, {_MESSAGE_COLUMNS}) SELECT rowid, {_MESSAGE_COLUMNS} FROM messages;
DROP TABLE messages;
ALTER TABLE messages_v7 RENAME TO messages;
{_LEAVE_TURNS}
"""

_LOG_BATCHES = """
CREATE TABLE turn_event_batches (
    turn_id TEXT NOT NULL REFERENCES turns (id) ON DELETE CASCADE,
    first_id INTEGER NOT NULL CHECK (first_id > 0),
    last_id INTEGER NOT NULL CHECK (last_id >= first_id),
    events TEXT NOT NULL
);
CREATE UNIQUE INDEX turn_event_batches_by_turn ON turn_event_batches (turn_id, last_id);
INSERT INTO turn_event_batches (turn_id, first_id, last_id, events)
    SELECT turn_id, id, id, json_array(json_array(id, type, data)) FROM turn_events
    ORDER BY turn_id, id;
DROP TABLE turn_events;
"""

_TITLES = """
CREATE TABLE chat_titles (
    chat_id TEXT PRIMARY KEY REFERENCES chats (id) ON DELETE CASCADE,
    title TEXT NOT NULL
);
"""
"""Version 10: the titles ``rename_chat`` sets, beside the chat rows (``_sqlite_titles``)."""

_LEASE_CLOCK = """
CREATE TABLE lease_clock (
    boot_id TEXT PRIMARY KEY,
    offset_seconds REAL NOT NULL
);
"""
"""Version 11: the offset of the lease timeline for the host's current boot
(``_lease_clock``): leases run on the boot's monotonic clock, not the wall clock. A row is
written by the first process of a boot; a database without one keeps its leases, which
that first write then ends (their holders died with the old boot)."""

_ATTACHED = """
ALTER TABLE turns ADD COLUMN attached INTEGER NOT NULL DEFAULT 0 CHECK (attached IN (0, 1));
"""
"""Version 14: whether a turn runs attached (``TurnStart.attached``: its events are never
logged). Existing turns read 0, not known, as before."""

_STATUS_IN = "CHECK (status IN ('in_progress', 'completed', 'aborted'))"
_STATUS_COMPARED = """CHECK (status = 'in_progress' OR status = 'completed'
        OR status = 'aborted')"""
_V9 = (_V7.replace("messages_v7", "messages_v9").replace(_LEAVE_TURNS, "")
       + _V6.replace("turns_v6", "turns_v9")).replace(_STATUS_IN, _STATUS_COMPARED)

MIGRATIONS: tuple[str, ...] = (_V1, _V2, _V3, _V4, _TURN_LOG,
                               _V6.replace("{leave_turns}", _LEAVE_TURNS), _V7, _LOG_BATCHES,
                               _V9.replace("{leave_turns}", _LEAVE_TURNS), _TITLES,
                               _LEASE_CLOCK, V12, V13, _ATTACHED, V15)
"""The schema, version by version: ``MIGRATIONS[i]`` creates version ``i + 1``."""

LATEST_VERSION = len(MIGRATIONS)

_BACKFILLS: dict[int, Callable[[sqlite3.Connection], None]] = {
    3: _count_history_chars, 12: set_media_apart}
_REBUILDS = frozenset({6, 7, 9})
"""Versions that rebuild a table: applied with foreign keys off (a ``PRAGMA`` that is a
no-op inside a transaction, so it is set around the migration's)."""


def schema_version(conn: sqlite3.Connection) -> int:
    """The highest applied migration (0 for a new database)."""
    conn.execute(_BOOTSTRAP)
    (version,) = conn.execute("SELECT coalesce(max(version), 0) FROM schema_migrations").fetchone()
    return int(version)


def require_current(conn: sqlite3.Connection) -> None:
    """Check, without writing, that the schema is the current one (an open that never
    creates or migrates: read-only, or ``create=False``).

    Raises:
        StorageError: no turnstate schema, or one of another version.
    """
    found = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' "
                         "AND name = 'schema_migrations'").fetchone()
    version = 0 if found is None else int(conn.execute(
        "SELECT coalesce(max(version), 0) FROM schema_migrations").fetchone()[0])
    if version != LATEST_VERSION:
        msg = (f"database schema version {version}, this turnstate reads version "
               f"{LATEST_VERSION} (nothing was created or migrated)")
        raise StorageError(msg)


def migrate(conn: sqlite3.Connection, *, target: int = LATEST_VERSION) -> tuple[int, ...]:
    """Apply every missing migration up to ``target``; returns the versions applied.

    ``conn`` must be in autocommit mode (``isolation_level=None``).

    Raises:
        StorageError: the database was written by a newer turnstate (its schema version
            is above ``LATEST_VERSION``), or a migration failed (nothing of it is kept).
    """
    current = schema_version(conn)
    if current > LATEST_VERSION:
        msg = (f"database schema version {current} is newer than this turnstate "
               f"supports ({LATEST_VERSION})")
        raise StorageError(msg)
    applied: list[int] = []
    for version in range(current + 1, target + 1):
        enforced = version in _REBUILDS and _foreign_keys_off(conn)
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                # Re-read under the write lock: another process may have migrated meanwhile.
                if schema_version(conn) < version:
                    _apply(conn, version)
                    applied.append(version)
                conn.execute("COMMIT")
            except BaseException:
                conn.rollback()
                raise
        finally:
            if enforced:
                conn.execute("PRAGMA foreign_keys = ON")
    return tuple(applied)


def foreign_tables_refused(conn: sqlite3.Connection) -> None:
    """Refuse a file that holds tables but no turnstate schema: another application's
    database (``serve --db app.sqlite``) got turnstate's tables and WAL mode written
    into it.

    Raises:
        StorageError: naming a few of its tables; nothing was written.
    """
    names = [row[0] for row in conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
        "ORDER BY name LIMIT 4")]
    if names and "schema_migrations" not in names and conn.execute(
            "SELECT 1 FROM sqlite_master WHERE name = 'schema_migrations'").fetchone() is None:
        msg = (f"not a turnstate database: it holds other tables ({', '.join(names[:3])}) "
               "and no turnstate schema (nothing was created or migrated)")
        raise StorageError(msg)


def _foreign_keys_off(conn: sqlite3.Connection) -> bool:
    """Turn foreign keys off; whether they were on."""
    (enforced,) = conn.execute("PRAGMA foreign_keys").fetchone()
    conn.execute("PRAGMA foreign_keys = OFF")
    return bool(enforced)


def _apply(conn: sqlite3.Connection, version: int) -> None:
    # One statement at a time: ``executescript`` would commit the open transaction first.
    for statement in _statements(MIGRATIONS[version - 1]):
        conn.execute(statement)
    backfill = _BACKFILLS.get(version)
    if backfill is not None:
        backfill(conn)
    conn.execute("INSERT INTO schema_migrations (version) VALUES (?)", (version,))


def _statements(script: str) -> list[str]:
    statements: list[str] = []
    pending = ""
    for line in script.splitlines(keepends=True):
        pending += line
        if sqlite3.complete_statement(pending):
            statements.append(pending.strip())
            pending = ""
    if pending.strip():
        statements.append(pending.strip())
    return statements
