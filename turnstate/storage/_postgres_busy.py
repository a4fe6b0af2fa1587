"""PostgreSQL schema version 11: a message's edit or delete is refused under a live lease.

Version 4's ``ts_change_history`` refused a live lease for ``delete_from`` only: an
``edit`` or a ``delete`` of one message went through while a turn held the chat, so the
turn's history changed under it and its commit ended ``commit_conflict`` (the server's
edit checked the lease in a read before the write, and a turn could begin between the
two). This version replaces the function (same signature, so ``CREATE OR REPLACE``
leaves no overload) with one that asks ``ts_lock_chat`` to refuse a live lease for every
kind but ``clear``: ``TSBSY`` (``ChatBusy``), checked once the chat's row is locked, after
the owner and before the message. Nothing else changes; rows are not touched.
"""

from __future__ import annotations

V11 = """
CREATE OR REPLACE FUNCTION ts_change_history(p_chat text, p_kind text, p_seq integer,
    p_parts jsonb, p_now timestamptz, p_owner text DEFAULT NULL) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    v_now timestamptz;
    v_count integer := 0;
    v_chars bigint := 0;  -- characters the committed history loses
    v_committed integer := 0;  -- committed messages edited or deleted
BEGIN
    v_now := ts_lock_chat(p_chat, p_owner, p_now, p_kind <> 'clear');
    IF p_kind <> 'clear' THEN
        PERFORM 1 FROM messages WHERE chat_id = p_chat AND seq = p_seq;
        IF NOT FOUND THEN
            PERFORM ts_raise('TSNFM', 'no such message', p_seq::text);
        END IF;
        SELECT coalesce(sum(ts_part_chars(parts)), 0), count(*) INTO v_chars, v_committed
            FROM messages WHERE chat_id = p_chat AND status = 'completed'
            AND (seq = p_seq OR (p_kind = 'delete_from' AND seq > p_seq));
    END IF;
    IF p_kind = 'edit' THEN
        UPDATE messages SET parts = p_parts, updated_at = v_now
            WHERE chat_id = p_chat AND seq = p_seq;
        IF v_committed > 0 THEN
            v_chars := v_chars - ts_part_chars(p_parts);
        END IF;
    ELSIF p_kind IN ('delete', 'delete_from') THEN
        DELETE FROM messages WHERE chat_id = p_chat
            AND (seq = p_seq OR (p_kind = 'delete_from' AND seq > p_seq));
        GET DIAGNOSTICS v_count = ROW_COUNT;
    END IF;
    UPDATE chats SET last_provider_state = NULL, version = version + 1, updated_at = v_now,
        history_chars = history_chars - v_chars,
        committed_seq = CASE WHEN p_kind <> 'edit' AND v_committed > 0
            THEN (SELECT max(seq) FROM messages WHERE chat_id = p_chat
                  AND status = 'completed')
            ELSE committed_seq END
        WHERE id = p_chat;
    RETURN v_count;
END $$;
"""
"""Schema version 11 (``MIGRATIONS[10]``)."""
