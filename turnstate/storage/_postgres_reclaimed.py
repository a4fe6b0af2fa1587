"""PostgreSQL schema version 15: a reclaimed turn's answer says its cost is unknown, and
the turn that lost its lease may write what it billed over that (``_reclaimed``).

``ts_reclaim_turn`` (every reclaim calls it: the begins and ``ts_reclaim_expired``) gives
the in-progress answer without an audit the reclaim's marker audit (the turn's provider
and model, ``usageMissing`` and ``leaseReclaimed``) before it aborts it as version 1
did. ``ts_abort_turn_billed`` (version 12) also writes a turn's usage and audit over an
aborted answer whose audit is that marker: only those two columns, once (the marker is
gone after), and nothing else of the answer or the turn's row.
"""

from __future__ import annotations

from turnstate.storage._reclaimed import LEASE_RECLAIMED, RECLAIMED_STRATEGY

V15 = f"""
CREATE OR REPLACE FUNCTION ts_reclaim_turn(p_turn text, p_now timestamptz) RETURNS void
LANGUAGE sql AS $$
    UPDATE messages m SET provider_state = jsonb_build_object(
            'provider', t.provider, 'modelName', t.model,
            'strategy', '{RECLAIMED_STRATEGY}', 'systemPromptHash', '', 'toolsetHash', '',
            'cursor', NULL, 'reason', 'lease_expired', 'metadata',
            jsonb_build_object('usageMissing', true, '{LEASE_RECLAIMED}', true))
        FROM turns t
        WHERE t.id = p_turn AND m.id = p_turn || ':assistant'
            AND m.status = 'in_progress' AND m.provider_state IS NULL;
    UPDATE messages SET status = 'aborted', updated_at = p_now
        WHERE id IN (p_turn || ':user', p_turn || ':assistant') AND status = 'in_progress';
    UPDATE turns SET status = 'aborted', reason = 'lease_expired', ended_at = p_now
        WHERE id = p_turn AND status = 'in_progress';
$$;

CREATE OR REPLACE FUNCTION ts_abort_turn_billed(p_chat text, p_turn text, p_parts jsonb,
    p_reason text, p_detail text, p_strategy text, p_path jsonb, p_now timestamptz,
    p_usage jsonb, p_state jsonb) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM 1 FROM chats WHERE id = p_chat FOR UPDATE;
    UPDATE messages SET usage = coalesce(p_usage, usage),
        provider_state = coalesce(p_state, provider_state)
        WHERE id = p_turn || ':assistant' AND status = 'in_progress';
    IF p_state IS NOT NULL THEN
        UPDATE messages SET usage = coalesce(p_usage, usage), provider_state = p_state
            WHERE id = p_turn || ':assistant' AND status = 'aborted'
                AND provider_state -> 'metadata' -> '{LEASE_RECLAIMED}' = 'true'::jsonb;
    END IF;
    PERFORM ts_abort_turn(p_chat, p_turn, p_parts, p_reason, p_detail, p_strategy, p_path,
                          p_now);
END $$;
"""
