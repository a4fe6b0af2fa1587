"""PostgreSQL schema version 18 (idem9): a turn's client key (``TurnStart.client_key``).

``turns.client_key`` holds the key a client gave its question (an ``Idempotency-Key``,
the AI SDK's user message id), unique in its chat by a partial index (a turn without a
key holds NULL and is not in it). A key names a question the chat still holds: a turn
whose question was deleted (``user_message_id`` NULL), or that the begin's cut deletes,
holds it no more. ``ts_take_turn_keyed`` is a keyed turn's begin: it
locks the chat (``ChatNotFound`` for a missing or another owner's), looks the key up
under that lock and raises ``TSKEY`` naming the turn that holds it (``TurnKeyRecorded``:
nothing written, before the busy check, so a retry of the running turn names it too);
else it takes the turn as the unkeyed begins do (``ts_take_turn``, or
``ts_take_turn_replacing`` with a cut), takes the key from the turns that held it and
writes it and the attached mark, in the same transaction. A turn without a key takes
the begin it took before: no statement, no parameter added.
"""

from __future__ import annotations

from turnstate.storage._postgres_v17 import _OUT, _TAKEN

V18 = f"""
ALTER TABLE turns ADD COLUMN client_key text;
CREATE UNIQUE INDEX turns_client_key ON turns (chat_id, client_key)
    WHERE client_key IS NOT NULL;
CREATE FUNCTION ts_take_turn_keyed(p_chat text, p_turn text, p_parts jsonb,
    p_provider text, p_model text, p_now timestamptz, p_lease interval, p_owner text,
    p_replace_from integer, p_attached boolean, p_key text, {_OUT})
LANGUAGE plpgsql AS $$
DECLARE
    v_found text;
BEGIN
    PERFORM ts_lock_chat(p_chat, p_owner, p_now, false);
    SELECT id INTO v_found FROM turns WHERE chat_id = p_chat AND client_key = p_key
        AND user_message_id IS NOT NULL
        AND (p_replace_from IS NULL OR user_seq < p_replace_from);
    IF FOUND THEN
        PERFORM ts_raise('TSKEY', 'client key recorded', v_found);
    END IF;
    IF p_replace_from IS NULL THEN
        {_TAKEN}
            FROM ts_take_turn(p_chat, p_turn, p_parts, p_provider, p_model, p_now,
                              p_lease, p_owner) t;
    ELSE
        {_TAKEN}
            FROM ts_take_turn_replacing(p_chat, p_turn, p_parts, p_provider, p_model,
                                        p_now, p_lease, p_owner, p_replace_from) t;
    END IF;
    UPDATE turns SET client_key = NULL WHERE chat_id = p_chat AND client_key = p_key;
    UPDATE turns SET client_key = p_key, attached = p_attached WHERE id = p_turn;
    SELECT c.* INTO chat FROM chats c WHERE c.id = p_chat;
END $$;
"""
"""Schema version 18 (``MIGRATIONS[17]``)."""
