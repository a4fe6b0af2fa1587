"""PostgreSQL schema version 10: a begin that replaces the chat's tail (``replace_from``).

``ts_take_turn_replacing`` is ``ts_take_turn_read`` (version 7) preceded, in the same
transaction, by ``ts_change_history``'s ``delete_from`` of the messages from
``p_replace_from`` on: the store's ``begin_turn`` with ``TurnStart.replace_from`` (the
server's regenerate). No other turn can take the chat between the cut and the take, as
it could between a ``delete_messages_from`` and a ``begin_turn``, and a refused begin
deletes nothing. Its checks keep begin's order, the cut's last: ``TSNFC`` (missing or
another owner's chat), ``TSBSY`` (a live lease), a unique violation for a recorded turn
id (``TurnAlreadyRecorded``; checked before the cut, where the insert would find it only
after), then ``TSNFM`` (no message ``p_replace_from``). The time is read once, when the
chat's row is locked, and both writes use it.
"""

from __future__ import annotations

V10 = """
CREATE FUNCTION ts_take_turn_replacing(p_chat text, p_turn text, p_parts jsonb,
    p_provider text, p_model text, p_now timestamptz, p_lease interval, p_owner text,
    p_replace_from integer,
    OUT version bigint, OUT seq integer, OUT expires_at timestamptz,
    OUT reclaimed_turn text, OUT reclaimed_expires_at timestamptz, OUT epoch bigint,
    OUT chat chats)
LANGUAGE plpgsql AS $$
DECLARE
    v_now timestamptz;
BEGIN
    v_now := ts_lock_chat(p_chat, p_owner, p_now, true);
    IF EXISTS (SELECT 1 FROM turns t WHERE t.id = p_turn)
            OR EXISTS (SELECT 1 FROM messages m WHERE m.id = p_turn || ':user') THEN
        RAISE unique_violation USING MESSAGE = 'turn already recorded: ' || p_turn;
    END IF;
    PERFORM ts_change_history(p_chat, 'delete_from', p_replace_from, NULL, v_now, p_owner);
    SELECT t.version, t.seq, t.expires_at, t.reclaimed_turn, t.reclaimed_expires_at,
            t.epoch
        INTO version, seq, expires_at, reclaimed_turn, reclaimed_expires_at, epoch
        FROM ts_take_turn(p_chat, p_turn, p_parts, p_provider, p_model, v_now, p_lease,
                          p_owner) t;
    SELECT c.* INTO chat FROM chats c WHERE c.id = p_chat;
END $$;
"""
"""Schema version 10 (``MIGRATIONS[9]``)."""
