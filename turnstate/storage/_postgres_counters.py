"""PostgreSQL schema version 3: the chat's history counters (``_protocol``).

``chats.committed_seq`` and ``chats.history_chars`` are filled for existing chats and
kept by the commit and history-change functions, which this version replaces. The text
is migration 3 as released (moved here from ``_postgres_schema`` unchanged, to keep that
module short); ``_postgres_owners`` (version 4) replaces ``ts_change_history`` again and
keeps the counters there.
"""

from __future__ import annotations

V3 = """
ALTER TABLE chats ADD COLUMN committed_seq integer,
    ADD COLUMN history_chars bigint NOT NULL DEFAULT 0 CHECK (history_chars >= 0);

-- Characters as Python counts them (``part_chars``): the store writes a NUL, a lone
-- surrogate or U+FFFE itself as U+FFFE plus four hex digits, five characters for one.
CREATE FUNCTION ts_text_chars(p text) RETURNS bigint LANGUAGE sql IMMUTABLE AS $$
    SELECT coalesce(char_length(p)
        - 4 * (char_length(p) - char_length(replace(p, chr(65534), ''))), 0)
$$;

CREATE FUNCTION ts_part_chars(p_parts jsonb) RETURNS bigint LANGUAGE sql IMMUTABLE AS $$
    SELECT coalesce(sum(CASE e->>'type'
        WHEN 'text' THEN ts_text_chars(e->>'text')
        WHEN 'reasoning' THEN ts_text_chars(e->>'text')
        WHEN 'tool_call' THEN ts_text_chars(e->>'name') + ts_text_chars(e->>'arguments')
        WHEN 'tool_result' THEN ts_text_chars(e->>'output')
        ELSE 0 END), 0)::bigint
    FROM jsonb_array_elements(p_parts) AS e
$$;

UPDATE chats c SET
    committed_seq = (SELECT max(seq) FROM messages m
        WHERE m.chat_id = c.id AND m.status = 'completed'),
    history_chars = (SELECT coalesce(sum(ts_part_chars(parts)), 0) FROM messages m
        WHERE m.chat_id = c.id AND m.status = 'completed');

CREATE OR REPLACE FUNCTION ts_commit_turn(p_chat text, p_turn text, p_base_version bigint,
    p_parts jsonb, p_audit jsonb, p_usage jsonb, p_state jsonb, p_context jsonb,
    p_strategy text, p_path jsonb, p_now timestamptz) RETURNS SETOF chats
LANGUAGE plpgsql AS $$
DECLARE
    v_now timestamptz := coalesce(p_now, clock_timestamp());
    v_chat chats;
    v_done integer;
    v_more integer;
BEGIN
    -- The compare-and-swap: no row unless the version and the lease are still the turn's.
    UPDATE chats SET last_provider_state = p_state, last_context_state = p_context,
        active_turn_id = NULL, active_turn_expires_at = NULL, version = version + 1,
        updated_at = v_now,
        committed_seq = (SELECT seq FROM messages WHERE id = p_turn || ':assistant'),
        history_chars = history_chars + ts_part_chars(p_parts) + coalesce((
            SELECT ts_part_chars(parts) FROM messages
            WHERE id = p_turn || ':user' AND status = 'in_progress'), 0)
        WHERE id = p_chat AND version = p_base_version AND active_turn_id = p_turn
        RETURNING * INTO v_chat;
    IF NOT FOUND THEN
        SELECT version INTO v_done FROM chats WHERE id = p_chat;
        IF NOT FOUND THEN
            PERFORM ts_raise('TSNFC', 'no such chat', p_chat);
        END IF;
        PERFORM ts_raise('TSCNF', 'the chat changed during the turn', v_done::text);
    END IF;
    UPDATE messages SET status = 'completed', parts = p_parts, provider_state = p_audit,
        usage = p_usage, updated_at = v_now
        WHERE id = p_turn || ':assistant' AND status = 'in_progress';
    GET DIAGNOSTICS v_done = ROW_COUNT;
    UPDATE messages SET status = 'completed', updated_at = v_now
        WHERE id = p_turn || ':user' AND status = 'in_progress';
    GET DIAGNOSTICS v_more = ROW_COUNT;
    IF v_done + v_more <> 2 THEN
        PERFORM ts_raise('TSCNF', 'the turn''s messages changed', p_base_version::text);
    END IF;
    UPDATE turns SET status = 'completed', strategy = p_strategy, path = p_path,
        ended_at = v_now WHERE id = p_turn;
    RETURN NEXT v_chat;
END $$;

CREATE OR REPLACE FUNCTION ts_change_history(p_chat text, p_kind text, p_seq integer,
    p_parts jsonb, p_now timestamptz) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_now timestamptz := coalesce(p_now, clock_timestamp());
    v_status text;
    v_chars bigint;
BEGIN
    UPDATE chats SET last_provider_state = NULL, version = version + 1, updated_at = v_now
        WHERE id = p_chat;
    IF NOT FOUND THEN
        PERFORM ts_raise('TSNFC', 'no such chat', p_chat);
    END IF;
    IF p_kind NOT IN ('edit', 'delete') THEN
        RETURN;
    END IF;
    SELECT status, ts_part_chars(parts) INTO v_status, v_chars FROM messages
        WHERE chat_id = p_chat AND seq = p_seq;
    IF NOT FOUND THEN
        PERFORM ts_raise('TSNFM', 'no such message', p_seq::text);
    END IF;
    IF p_kind = 'edit' THEN
        UPDATE messages SET parts = p_parts, updated_at = v_now
            WHERE chat_id = p_chat AND seq = p_seq;
        IF v_status = 'completed' THEN
            UPDATE chats SET history_chars = history_chars + ts_part_chars(p_parts) - v_chars
                WHERE id = p_chat;
        END IF;
    ELSE
        DELETE FROM messages WHERE chat_id = p_chat AND seq = p_seq;
        IF v_status = 'completed' THEN
            UPDATE chats SET history_chars = history_chars - v_chars,
                committed_seq = (SELECT max(seq) FROM messages
                    WHERE chat_id = p_chat AND status = 'completed')
                WHERE id = p_chat;
        END IF;
    END IF;
END $$;
"""
"""Schema version 3 (``MIGRATIONS[2]``), exactly as released."""
