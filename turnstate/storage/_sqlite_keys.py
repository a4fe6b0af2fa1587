"""SQLite schema version 15 (idem9): a turn's client key (``TurnStart.client_key``).

``turns.client_key`` holds the key a client gave its question (an ``Idempotency-Key``,
the AI SDK's user message id), unique in its chat by a partial index (a turn without a
key holds NULL and is not in the index). A key names a question the chat still holds:
a turn whose question was deleted (``user_message_id`` NULL), or that the begin's cut
deletes, holds it no more, and the begin that takes it clears it there. A keyed begin
looks the key up first, in its own ``BEGIN IMMEDIATE`` transaction, after the chat's
owner check and before the busy check: a retry of a running or an ended turn is
``TurnKeyRecorded`` naming it, nothing written. A turn without a key takes the begin
it took before (no statement added).
"""

from __future__ import annotations

import sqlite3

V15 = """
ALTER TABLE turns ADD COLUMN client_key TEXT;
CREATE UNIQUE INDEX turns_client_key ON turns (chat_id, client_key)
    WHERE client_key IS NOT NULL;
"""
"""Version 15: existing turns hold no key (NULL)."""

# $1 chat, $2 key, $3 and $4 the begin's cut or NULL: a turn whose question is gone
# (``user_message_id`` NULL), or is cut by this begin, holds its key no more.
TURN_BY_KEY = """SELECT id FROM turns WHERE chat_id = ? AND client_key = ?
    AND user_message_id IS NOT NULL AND (? IS NULL OR user_seq < ?)"""
TAKE_KEY = "UPDATE turns SET client_key = NULL WHERE chat_id = ? AND client_key = ?"
SET_KEY = "UPDATE turns SET client_key = ? WHERE id = ?"
KEY_OF_TURN = "SELECT client_key FROM turns WHERE id = ? AND chat_id = ?"


def record_key(conn: sqlite3.Connection, chat_id: str, key: str | None,
               turn_id: str) -> None:
    """Write a keyed turn's key, in its begin's transaction, taken from the turns whose
    questions are gone (none for a turn without)."""
    if key is not None:
        conn.execute(TAKE_KEY, (chat_id, key))
        conn.execute(SET_KEY, (key, turn_id))
