"""PostgreSQL schema version 7: begin hands back the chat it leased (issue 26).

``ts_take_turn_read`` is ``ts_take_turn`` (version 5) plus the chat's row as the take
left it (lease taken, epoch grown), read by a second statement of the same function, so
inside the same transaction and after the take's writes: the store's ``begin_turn``
returns it on the lease (``TurnLease.chat``) and the engine makes no ``load_chat`` round
trip of its own before a cursor turn's request. A plain ``SELECT`` joining ``chats`` to
``ts_take_turn`` would not do: every part of one statement reads the snapshot taken
when the statement started, before the function's writes.
"""

from __future__ import annotations

V7 = """
CREATE FUNCTION ts_take_turn_read(p_chat text, p_turn text, p_parts jsonb, p_provider text,
    p_model text, p_now timestamptz, p_lease interval, p_owner text,
    OUT version bigint, OUT seq integer, OUT expires_at timestamptz,
    OUT reclaimed_turn text, OUT reclaimed_expires_at timestamptz, OUT epoch bigint,
    OUT chat chats)
LANGUAGE plpgsql AS $$
BEGIN
    SELECT t.version, t.seq, t.expires_at, t.reclaimed_turn, t.reclaimed_expires_at,
            t.epoch
        INTO version, seq, expires_at, reclaimed_turn, reclaimed_expires_at, epoch
        FROM ts_take_turn(p_chat, p_turn, p_parts, p_provider, p_model, p_now, p_lease,
                          p_owner) t;
    SELECT c.* INTO chat FROM chats c WHERE c.id = p_chat;
END $$;
"""
