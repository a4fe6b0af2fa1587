"""PostgreSQL schema version 5: the lease epoch, the fencing token of every turn write.

``chats.lease_epoch`` grows by one with every take of the chat's lease. ``ts_take_turn``
is ``ts_begin_turn`` plus that increment, in the same transaction, and returns the new
epoch. ``ts_fence`` locks the chat's row and says whether a lease (turn, epoch) still
holds it; the fenced transition and commit call it first, in the same statement as
their write, and refuse a stale lease with ``TSCNF`` (``CommitConflict``). The renewal is
one guarded ``UPDATE`` (``_postgres_sql.RENEW_LEASE``). The abort stays as it was: it
marks only what is still the turn's and releases the chat only while the turn holds it
(a turn takes its chat once, so the turn id already names the take).
"""

from __future__ import annotations

V5 = """
ALTER TABLE chats ADD COLUMN lease_epoch bigint NOT NULL DEFAULT 0 CHECK (lease_epoch >= 0);

CREATE FUNCTION ts_fence(p_chat text, p_turn text, p_epoch bigint) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    v_active text;
    v_epoch bigint;
BEGIN
    SELECT active_turn_id, lease_epoch INTO v_active, v_epoch FROM chats
        WHERE id = p_chat FOR UPDATE;
    IF NOT FOUND THEN
        PERFORM ts_raise('TSNFC', 'no such chat', p_chat);
    END IF;
    RETURN v_active IS NOT DISTINCT FROM p_turn AND v_epoch = p_epoch;
END $$;

CREATE FUNCTION ts_refuse_stale(p_chat text, p_turn text, p_epoch bigint) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF NOT ts_fence(p_chat, p_turn, p_epoch) THEN
        PERFORM ts_raise('TSCNF', 'the turn no longer holds the chat',
                         (SELECT version FROM chats WHERE id = p_chat)::text);
    END IF;
END $$;

CREATE FUNCTION ts_take_turn(p_chat text, p_turn text, p_parts jsonb, p_provider text,
    p_model text, p_now timestamptz, p_lease interval, p_owner text,
    OUT version bigint, OUT seq integer, OUT expires_at timestamptz,
    OUT reclaimed_turn text, OUT reclaimed_expires_at timestamptz, OUT epoch bigint)
LANGUAGE plpgsql AS $$
BEGIN
    SELECT b.version, b.seq, b.expires_at, b.reclaimed_turn, b.reclaimed_expires_at
        INTO version, seq, expires_at, reclaimed_turn, reclaimed_expires_at
        FROM ts_begin_turn(p_chat, p_turn, p_parts, p_provider, p_model, p_now, p_lease,
                           p_owner) b;
    UPDATE chats c SET lease_epoch = c.lease_epoch + 1 WHERE c.id = p_chat
        RETURNING c.lease_epoch INTO epoch;
END $$;

CREATE FUNCTION ts_record_transition_fenced(p_chat text, p_turn text, p_epoch bigint,
    p_base_version bigint, p_part jsonb, p_clear boolean, p_now timestamptz) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM ts_refuse_stale(p_chat, p_turn, p_epoch);
    PERFORM ts_record_transition(p_chat, p_turn, p_base_version, p_part, p_clear, p_now);
END $$;

CREATE FUNCTION ts_commit_turn_fenced(p_chat text, p_turn text, p_epoch bigint,
    p_base_version bigint, p_parts jsonb, p_audit jsonb, p_usage jsonb, p_state jsonb,
    p_context jsonb, p_strategy text, p_path jsonb, p_now timestamptz) RETURNS SETOF chats
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM ts_refuse_stale(p_chat, p_turn, p_epoch);
    RETURN QUERY SELECT * FROM ts_commit_turn(p_chat, p_turn, p_base_version, p_parts,
        p_audit, p_usage, p_state, p_context, p_strategy, p_path, p_now);
END $$;
"""
