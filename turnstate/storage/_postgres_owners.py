"""PostgreSQL schema version 4: owners checked inside each write, and the server's deletes.

Earlier functions took no owner. Version 4 replaces ``ts_begin_turn`` and
``ts_change_history`` with versions that take ``p_owner`` (last, ``DEFAULT NULL``: NULL
skips the check, as ``owner=None`` does), and adds ``ts_delete_chat``. Each check
happens after the function holds the chat's row and before it writes anything; another
owner's chat raises ``TSNFC`` exactly as a missing chat does. ``ts_change_history`` now
also cuts a chat's tail (``delete_from``), returns how many messages it deleted, and
keeps version 3's counters (``committed_seq``, ``history_chars``) for every kind. The old
functions are dropped first: a ``CREATE OR REPLACE`` with an extra argument would add an
overload, and a call with the old arguments would then be ambiguous. The owner index
gains ``id``, the tie-breaker of ``list_chats``' keyset pages.
"""

from __future__ import annotations

_LOCK = """
-- Lock the chat row, check it exists and (when p_owner is given) is p_owner's, and
-- (when p_refuse_busy) that no live lease holds it. Returns the time of the change,
-- read once the row is ours.
CREATE FUNCTION ts_lock_chat(p_chat text, p_owner text, p_now timestamptz,
    p_refuse_busy boolean) RETURNS timestamptz
LANGUAGE plpgsql AS $$
DECLARE
    v_now timestamptz;
    v_owner text;
    v_active text;
    v_expires timestamptz;
BEGIN
    SELECT owner, active_turn_id, active_turn_expires_at INTO v_owner, v_active, v_expires
        FROM chats WHERE id = p_chat FOR UPDATE;
    v_now := coalesce(p_now, clock_timestamp());  -- once the row is ours
    IF NOT FOUND OR (p_owner IS NOT NULL AND v_owner <> p_owner) THEN
        PERFORM ts_raise('TSNFC', 'no such chat', p_chat);
    END IF;
    IF p_refuse_busy AND v_active IS NOT NULL AND v_expires > v_now THEN
        PERFORM ts_raise('TSBSY', 'chat is busy', v_active);
    END IF;
    RETURN v_now;
END $$;
"""

_BEGIN = """
DROP FUNCTION ts_begin_turn(text, text, jsonb, text, text, timestamptz, interval);

CREATE FUNCTION ts_begin_turn(p_chat text, p_turn text, p_parts jsonb, p_provider text,
    p_model text, p_now timestamptz, p_lease interval, p_owner text DEFAULT NULL,
    OUT version bigint, OUT seq integer, OUT expires_at timestamptz,
    OUT reclaimed_turn text, OUT reclaimed_expires_at timestamptz)
LANGUAGE plpgsql AS $$
DECLARE
    v_now timestamptz;
    v_active text;
    v_owner text;
BEGIN
    SELECT c.version, c.active_turn_id, c.active_turn_expires_at, c.owner
        INTO version, v_active, reclaimed_expires_at, v_owner
        FROM chats c WHERE c.id = p_chat FOR UPDATE;
    v_now := coalesce(p_now, clock_timestamp());  -- once the row is ours
    IF NOT FOUND OR (p_owner IS NOT NULL AND v_owner <> p_owner) THEN
        PERFORM ts_raise('TSNFC', 'no such chat', p_chat);
    END IF;
    IF v_active IS NOT NULL THEN
        IF reclaimed_expires_at > v_now THEN
            PERFORM ts_raise('TSBSY', 'chat is busy', v_active);
        END IF;
        PERFORM ts_reclaim_turn(v_active, v_now);
        reclaimed_turn := v_active;
    ELSE
        reclaimed_expires_at := NULL;
    END IF;
    SELECT coalesce(max(m.seq), 0) + 1 INTO seq FROM messages m WHERE m.chat_id = p_chat;
    INSERT INTO messages (id, chat_id, seq, role, status, parts, created_at, updated_at)
        VALUES (p_turn || ':user', p_chat, seq, 'user', 'in_progress', p_parts, v_now, v_now),
               (p_turn || ':assistant', p_chat, seq + 1, 'assistant', 'in_progress', '[]',
                v_now, v_now);
    INSERT INTO turns (id, chat_id, user_message_id, assistant_message_id, user_seq,
            assistant_seq, status, provider, model, started_at)
        VALUES (p_turn, p_chat, p_turn || ':user', p_turn || ':assistant', seq, seq + 1,
                'in_progress', p_provider, p_model, v_now);
    expires_at := v_now + p_lease;
    UPDATE chats SET active_turn_id = p_turn, active_turn_expires_at = expires_at,
        updated_at = v_now WHERE id = p_chat;
END $$;
"""

_CHANGES = """
DROP FUNCTION ts_change_history(text, text, integer, jsonb, timestamptz);

-- p_kind: 'clear' the cursor, 'edit' or 'delete' the message p_seq, or 'delete_from'
-- p_seq on (refused while a live lease holds the chat). Every kind clears the cursor and
-- bumps the version; the counters follow: an edited committed message's count moves to
-- its new parts, deleted committed messages take theirs away and the seq is recomputed.
-- Returns the number of messages deleted.
CREATE FUNCTION ts_change_history(p_chat text, p_kind text, p_seq integer, p_parts jsonb,
    p_now timestamptz, p_owner text DEFAULT NULL) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    v_now timestamptz;
    v_count integer := 0;
    v_chars bigint := 0;  -- characters the committed history loses
    v_committed integer := 0;  -- committed messages edited or deleted
BEGIN
    v_now := ts_lock_chat(p_chat, p_owner, p_now, p_kind = 'delete_from');
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

-- The chat with its turn records and messages (turns first: they reference messages).
CREATE FUNCTION ts_delete_chat(p_chat text, p_now timestamptz, p_owner text DEFAULT NULL)
    RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM ts_lock_chat(p_chat, p_owner, p_now, true);
    DELETE FROM turns WHERE chat_id = p_chat;
    DELETE FROM messages WHERE chat_id = p_chat;
    DELETE FROM chats WHERE id = p_chat;
END $$;
"""

_INDEX = """
-- list_chats pages by (updated_at, id) descending: with id in the index a page is one
-- backward range scan (the row comparison is its start), no sort.
DROP INDEX chats_by_owner;
CREATE INDEX chats_by_owner ON chats (owner, updated_at, id);
"""

V4 = _LOCK + _BEGIN + _CHANGES + _INDEX
"""Schema version 4 (``MIGRATIONS[3]``)."""
