"""PostgreSQL schema version 17 (lifecycle7): deletes lock a chat's turns in the log's
order, and a turn records whether it runs attached.

The log's ``append_many`` locks its turns ``FOR SHARE`` by (chat id, id), the sweep's
order (lifecycle4). ``ts_delete_chat`` deleted the chat's turns in its index's order (the
order they began) and a message delete set its turns' message ids to NULL through the
foreign keys in the messages' order, each row locked as it was reached: against one
append batch that held two ended turns of that chat in the other order, each side held
one turn and waited for the other, and PostgreSQL aborted one after ``deadlock_timeout``
(the store retried it, a second late). Both now lock the turns they will touch by id,
after the chat's row (as every chat write does), before the delete: no cycle can form.
``ts_change_history`` is version 11's with that one statement added (same signature:
``CREATE OR REPLACE`` leaves no overload), so a begin that replaces the chat's tail
(``ts_take_turn_replacing``) gets it too.

``turns.attached`` is true for a turn its consumer iterates with ``run_turn`` in its own
loop: its events are never logged, so a follower on another node says ``not_logged`` at
once and rebuilds its end without waiting for a final event nobody writes. Rows from
before this version, and turns begun by an older node, read false (as before: nothing
known). ``ts_take_turn_attached`` and ``ts_take_turn_replacing_attached`` are the two
begins (versions 7 and 10) plus the mark, in the same transaction; a detached turn's
begin is unchanged.
"""

from __future__ import annotations

from turnstate.storage._postgres_busy import V11

_LOCK_TURNS = """ELSIF p_kind IN ('delete', 'delete_from') THEN
        -- the turns whose message ids the delete sets to NULL, locked by id first
        PERFORM 1 FROM turns WHERE chat_id = p_chat AND assistant_seq >= p_seq
            ORDER BY id FOR UPDATE;"""

_CHANGES = V11.replace("ELSIF p_kind IN ('delete', 'delete_from') THEN", _LOCK_TURNS, 1)
assert _CHANGES != V11

_DELETE_CHAT = """
CREATE OR REPLACE FUNCTION ts_delete_chat(p_chat text, p_now timestamptz,
    p_owner text DEFAULT NULL) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM ts_lock_chat(p_chat, p_owner, p_now, true);
    -- the chat's turns locked by id (the log's order) before any is deleted
    PERFORM 1 FROM turns WHERE chat_id = p_chat ORDER BY id FOR UPDATE;
    DELETE FROM turns WHERE chat_id = p_chat;
    DELETE FROM messages WHERE chat_id = p_chat;
    DELETE FROM chats WHERE id = p_chat;
END $$;
"""

_OUT = """OUT version bigint, OUT seq integer, OUT expires_at timestamptz,
    OUT reclaimed_turn text, OUT reclaimed_expires_at timestamptz, OUT epoch bigint,
    OUT chat chats"""
_TAKEN = """SELECT t.version, t.seq, t.expires_at, t.reclaimed_turn, t.reclaimed_expires_at,
            t.epoch
        INTO version, seq, expires_at, reclaimed_turn, reclaimed_expires_at, epoch"""

_ATTACHED = f"""
ALTER TABLE turns ADD COLUMN attached boolean NOT NULL DEFAULT false;
CREATE FUNCTION ts_take_turn_attached(p_chat text, p_turn text, p_parts jsonb,
    p_provider text, p_model text, p_now timestamptz, p_lease interval, p_owner text,
    {_OUT})
LANGUAGE plpgsql AS $$
BEGIN
    {_TAKEN}
        FROM ts_take_turn(p_chat, p_turn, p_parts, p_provider, p_model, p_now, p_lease,
                          p_owner) t;
    UPDATE turns SET attached = true WHERE id = p_turn;
    SELECT c.* INTO chat FROM chats c WHERE c.id = p_chat;
END $$;
CREATE FUNCTION ts_take_turn_replacing_attached(p_chat text, p_turn text, p_parts jsonb,
    p_provider text, p_model text, p_now timestamptz, p_lease interval, p_owner text,
    p_replace_from integer, {_OUT})
LANGUAGE plpgsql AS $$
BEGIN
    {_TAKEN}
        FROM ts_take_turn_replacing(p_chat, p_turn, p_parts, p_provider, p_model, p_now,
                                    p_lease, p_owner, p_replace_from) t;
    UPDATE turns SET attached = true WHERE id = p_turn;
    SELECT c.* INTO chat FROM chats c WHERE c.id = p_chat;
END $$;
"""

V17 = _CHANGES + _DELETE_CHAT + _ATTACHED
"""Schema version 17 (``MIGRATIONS[16]``)."""
