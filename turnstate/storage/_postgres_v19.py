"""PostgreSQL schema version 19 (places12): a change that expects the message it names.

``ts_change_history_expected`` is ``ts_change_history`` (an ``edit`` or a
``delete_from``) after one more check, in the same transaction with the chat's row
locked: the message at ``p_seq`` must be the one the caller read (``_expected``: its id,
status and ``updated_at``), else ``TSMCH`` naming the id there (``MessageChanged``),
nothing written. Its checks keep the order of ``ts_change_history``'s: ``TSNFC``,
``TSBSY``, ``TSNFM``, then ``TSMCH``. ``ts_change_history`` is version 17's (same
signature: ``CREATE OR REPLACE`` leaves no overload) but for an edit's stamp, strictly
later than the message's last change (a microsecond after it when the clock has not
passed it), so an edit is told from the message before it whatever the clock did. A
change without an expected message takes the function it took before; rows are not
touched.

``ts_begin_expected`` is a cutting begin's check of its ``TurnStart.expect``
(``CutExpected``), run in the begin's statement before the take (``FROM
ts_begin_expected(...) e, LATERAL ts_take_turn_...(..., e.now, ...)``: the take's time
is the check's output, so the check runs first, in the same transaction): it locks the
chat (``TSNFC``), then with ``p_key_checked`` raises ``TSKEY`` naming the key's holder
(empty when none) unless it is ``p_holder`` (a key taken over only from the turn the
caller read: a copy of a keyed edit on another node never cuts the turn the edit ran),
then with ``p_id`` raises ``TSBSY`` for a live lease (the begin's order) and ``TSMCH``
when the message at the cut is not the one read; a missing one is left to the take
(``TSNFM``). It returns ``p_now`` unchanged.
"""

from __future__ import annotations

from turnstate.storage._postgres_v17 import _CHANGES

_STAMP = "UPDATE messages SET parts = p_parts, updated_at = v_now"
_LATER = ("UPDATE messages SET parts = p_parts,\n"
          "            updated_at = greatest(v_now, updated_at + interval '1 microsecond')")
_STAMPED = _CHANGES.replace(_STAMP, _LATER, 1)
assert _STAMPED != _CHANGES

V19 = _STAMPED + """
CREATE FUNCTION ts_change_history_expected(p_chat text, p_kind text, p_seq integer,
    p_parts jsonb, p_now timestamptz, p_owner text, p_id text, p_status text,
    p_updated_at timestamptz) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    v_id text;
    v_status text;
    v_updated_at timestamptz;
BEGIN
    PERFORM ts_lock_chat(p_chat, p_owner, p_now, true);
    SELECT id, status, updated_at INTO v_id, v_status, v_updated_at
        FROM messages WHERE chat_id = p_chat AND seq = p_seq;
    IF NOT FOUND THEN
        PERFORM ts_raise('TSNFM', 'no such message', p_seq::text);
    END IF;
    IF v_id <> p_id OR v_status <> p_status OR v_updated_at <> p_updated_at THEN
        PERFORM ts_raise('TSMCH', 'the message changed', v_id);
    END IF;
    RETURN ts_change_history(p_chat, p_kind, p_seq, p_parts, p_now, p_owner);
END $$;
"""
"""Schema version 19 (``MIGRATIONS[18]``)."""

_BEGIN_EXPECTED = """
CREATE FUNCTION ts_begin_expected(p_chat text, p_owner text, p_now timestamptz,
    p_seq integer, p_id text, p_status text, p_updated_at timestamptz, p_key text,
    p_key_checked boolean, p_holder text) RETURNS timestamptz
LANGUAGE plpgsql AS $$
DECLARE
    v_now timestamptz;
    v_holder text;
    v_active text;
    v_expires timestamptz;
    v_id text;
    v_status text;
    v_updated_at timestamptz;
BEGIN
    v_now := ts_lock_chat(p_chat, p_owner, p_now, false);
    IF p_key_checked AND p_key IS NOT NULL THEN
        SELECT id INTO v_holder FROM turns WHERE chat_id = p_chat AND client_key = p_key
            AND user_message_id IS NOT NULL;
        IF v_holder IS DISTINCT FROM p_holder THEN
            PERFORM ts_raise('TSKEY', 'client key taken since', coalesce(v_holder, ''));
        END IF;
    END IF;
    IF p_id IS NOT NULL THEN
        SELECT active_turn_id, active_turn_expires_at INTO v_active, v_expires
            FROM chats WHERE id = p_chat;
        IF v_active IS NOT NULL AND v_expires > v_now THEN
            PERFORM ts_raise('TSBSY', 'chat is busy', v_active);
        END IF;
        SELECT id, status, updated_at INTO v_id, v_status, v_updated_at
            FROM messages WHERE chat_id = p_chat AND seq = p_seq;
        IF FOUND AND (v_id <> p_id OR v_status <> p_status
                      OR v_updated_at <> p_updated_at) THEN
            PERFORM ts_raise('TSMCH', 'the message changed', v_id);
        END IF;
    END IF;
    RETURN p_now;
END $$;
"""

V19 += _BEGIN_EXPECTED
