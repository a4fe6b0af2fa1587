"""PostgreSQL schema version 12: an abort that keeps what the turn billed.

``ts_abort_turn_billed`` is ``ts_abort_turn`` (version 2) with the aborted answer's
``usage`` and ``provider_state`` (the audit record with ``costUsd``) written too, as a
commit writes them: the store's ``abort_turn`` for a ``TurnAbort`` whose requests were
answered (``TurnAbort.usage`` / ``audit``). It locks the chat's row first, as every turn
function does, so it takes its locks in their order; the answer is written only while
it is still in progress (a reclaimed turn's was aborted already), and a null keeps what
the row holds.
"""

from __future__ import annotations

V12 = """
CREATE FUNCTION ts_abort_turn_billed(p_chat text, p_turn text, p_parts jsonb,
    p_reason text, p_detail text, p_strategy text, p_path jsonb, p_now timestamptz,
    p_usage jsonb, p_state jsonb) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM 1 FROM chats WHERE id = p_chat FOR UPDATE;
    UPDATE messages SET usage = coalesce(p_usage, usage),
        provider_state = coalesce(p_state, provider_state)
        WHERE id = p_turn || ':assistant' AND status = 'in_progress';
    PERFORM ts_abort_turn(p_chat, p_turn, p_parts, p_reason, p_detail, p_strategy, p_path,
                          p_now);
END $$;
"""
