"""PostgreSQL schema versions 8 and 14: images and files.

Version 8: images and files count towards ``history_chars``.

A stored image or file part carries ``tokens``, its provider-neutral token estimate
when it was written (``storage._records``); ``ts_part_chars`` counts it as
``CHARS_PER_TOKEN`` characters per token, as ``part_chars`` and ``stored_chars`` do in
Python, so the counters the commit and the history changes keep in SQL agree with
the other stores. No stored part had these types before, so no chat is recounted.

Version 14: a message's inline media bytes live apart from its parts, in ``media``
(``bytea[]``, stored uncompressed out of line), so a lean read (``storage._lean``),
which reads ``parts`` only, never reads them from disk. Before, a 16 MiB image was 22 MB
of base64 inside the ``parts`` ``jsonb``, de-TOASTed whole for the query to strip it:
a lean read of ten such chats read 222 MiB of buffers. Writers are unchanged: a
trigger on every write of ``parts`` (``ts_media_apart``) moves each image's and file's
``data`` into ``media`` and leaves ``size`` (its length) and ``media`` (its place in the
array, from 1) in the part; parts written back from the row itself (an element with
``media`` but no ``data``, as ``parts || x`` gives) keep their bytes. A full read
reads both columns and puts the bytes back in Python (``_media_apart``): no base64 is
made or parsed on either side. The migration sets every existing message's media apart.
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

_IS_MEDIA = """@? '$[*] ? (@.type == "image" || @.type == "file")'"""

V14 = f"""
ALTER TABLE messages ADD COLUMN media bytea[];
ALTER TABLE messages ALTER COLUMN media SET STORAGE EXTERNAL;  -- images do not compress

CREATE FUNCTION ts_media_apart() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    v_parts jsonb := '[]';
    v_media bytea[] := '{{}}';
    v_bytes bytea;
    e jsonb;
BEGIN
    FOR e IN SELECT x FROM jsonb_array_elements(NEW.parts) AS x LOOP
        v_bytes := NULL;
        IF e->>'type' IN ('image', 'file') THEN
            IF jsonb_typeof(e->'data') = 'string' THEN
                v_bytes := decode(e->>'data', 'base64');
            ELSIF e ? 'media' THEN  -- parts read from this row, written back (appended to)
                IF TG_OP = 'UPDATE' THEN
                    v_bytes := OLD.media[(e->>'media')::integer];
                END IF;
                IF v_bytes IS NULL THEN
                    RAISE EXCEPTION 'a media part names bytes its message does not hold';
                END IF;
            END IF;
        END IF;
        IF v_bytes IS NOT NULL THEN
            v_media := array_append(v_media, v_bytes);
            e := (e - 'data') || jsonb_build_object('size', octet_length(v_bytes),
                                                    'media', cardinality(v_media));
        END IF;
        v_parts := v_parts || jsonb_build_array(e);
    END LOOP;
    NEW.parts := v_parts;
    NEW.media := CASE WHEN cardinality(v_media) > 0 THEN v_media END;
    RETURN NEW;
END $$;

CREATE TRIGGER messages_media_apart BEFORE INSERT ON messages FOR EACH ROW
    WHEN (NEW.parts {_IS_MEDIA}) EXECUTE FUNCTION ts_media_apart();
CREATE TRIGGER messages_media_apart_again BEFORE UPDATE OF parts ON messages FOR EACH ROW
    WHEN (NEW.parts {_IS_MEDIA} OR OLD.media IS NOT NULL) EXECUTE FUNCTION ts_media_apart();

-- Existing rows: the trigger sets each message's media apart.
UPDATE messages SET parts = parts WHERE parts {_IS_MEDIA};
"""
"""Schema version 14 (``MIGRATIONS[13]``): media bytes apart from the parts."""
