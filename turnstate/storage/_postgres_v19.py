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
