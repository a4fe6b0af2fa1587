"""PostgreSQL schema version 8: images and files count towards ``history_chars``.

A stored image or file part carries ``tokens``, its provider-neutral token estimate
when it was written (``storage._records``); ``ts_part_chars`` counts it as
``CHARS_PER_TOKEN`` characters per token, as ``part_chars`` and ``stored_chars`` do in
Python, so the counters the commit and the history changes keep in SQL agree with
the other stores. No stored part had these types before, so no chat is recounted.
"""

from __future__ import annotations

from turnstate.core._context import CHARS_PER_TOKEN

V8 = f"""
CREATE OR REPLACE FUNCTION ts_part_chars(p_parts jsonb) RETURNS bigint
LANGUAGE sql IMMUTABLE AS $$
    SELECT coalesce(sum(CASE e->>'type'
        WHEN 'text' THEN ts_text_chars(e->>'text')
        WHEN 'reasoning' THEN ts_text_chars(e->>'text')
        WHEN 'tool_call' THEN ts_text_chars(e->>'name') + ts_text_chars(e->>'arguments')
        WHEN 'tool_result' THEN ts_text_chars(e->>'output')
        WHEN 'image' THEN {CHARS_PER_TOKEN} * (e->>'tokens')::bigint
        WHEN 'file' THEN {CHARS_PER_TOKEN} * (e->>'tokens')::bigint
        ELSE 0 END), 0)::bigint
    FROM jsonb_array_elements(p_parts) AS e
$$;
"""
"""Schema version 8 (``MIGRATIONS[7]``)."""
