"""PostgreSQL schema version 16: the bytes each owner stores, and the quota on them.

As SQLite's version 13 (``_sqlite_quota``, where the rules are): ``storage_quota`` holds
the database's one limit; while one is set (``ts_set_storage_quota`` creates the
triggers and counts every owner from the rows; without a quota there is no trigger),
``owner_storage`` holds one counter per owner, kept by row triggers in the transaction
of every write (any process's, any function's). A message counts the text bytes of its
three ``jsonb`` columns (``octet_length(x::text)``: the same for a row's insert and its
delete, unlike ``pg_column_size``, which depends on when the value was compressed) and
the bytes of its ``media``; a title its bytes; a log batch its events' text. A refused
write raises ``TSQTA`` from inside its own statement (``StorageQuotaExceeded``), so
nothing of it stays. The counter's row is locked by the update, so two writes of one
owner count one after the other: two concurrent begins cannot pass the quota together.
A chat's delete drops its title, and a turn's its log batches, in ``BEFORE DELETE``
triggers: a foreign key's cascade runs after the parent row is gone, when the owner can
no longer be found.
"""

from __future__ import annotations

_MESSAGE_BYTES = """ts_message_bytes({row}.parts, {row}.provider_state, {row}.usage,
        {row}.media)"""
_CHAT_BYTES = f"""(SELECT coalesce(sum({_MESSAGE_BYTES.format(row="m")}), 0) FROM messages m
        WHERE m.chat_id = c.id)
    + (SELECT coalesce(sum(octet_length(t.title)), 0) FROM chat_titles t
        WHERE t.chat_id = c.id)
    + (SELECT coalesce(sum(octet_length(b.events)), 0) FROM turn_event_batches b
        JOIN turns u ON u.id = b.turn_id WHERE u.chat_id = c.id)"""
"""The bytes chat ``c`` holds, counted from its rows."""

V16 = f"""
CREATE TABLE owner_storage (
    owner text COLLATE "C" PRIMARY KEY,
    used_bytes bigint NOT NULL DEFAULT 0
);
CREATE TABLE storage_quota (
    id integer PRIMARY KEY CHECK (id = 1),
    max_bytes bigint CHECK (max_bytes IS NULL OR max_bytes >= 0)
);
INSERT INTO storage_quota (id, max_bytes) VALUES (1, NULL);

CREATE FUNCTION ts_message_bytes(p_parts jsonb, p_state jsonb, p_usage jsonb,
    p_media bytea[]) RETURNS bigint
LANGUAGE sql IMMUTABLE AS $$
    SELECT coalesce(octet_length(p_parts::text), 0) + coalesce(octet_length(p_state::text), 0)
        + coalesce(octet_length(p_usage::text), 0)
        + coalesce((SELECT sum(octet_length(b)) FROM unnest(p_media) AS b), 0)
$$;


-- Add p_delta to the owner of chat p_chat; with p_refuse, raise TSQTA when a growth takes
-- the owner past the quota (the whole statement is then undone).
CREATE FUNCTION ts_owner_grow(p_chat text, p_delta bigint, p_refuse boolean) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_used bigint;
BEGIN
    IF p_delta = 0 THEN
        RETURN;
    END IF;
    UPDATE owner_storage s SET used_bytes = s.used_bytes + p_delta
        FROM chats c WHERE c.id = p_chat AND s.owner = c.owner
        RETURNING s.used_bytes INTO v_used;
    IF p_refuse AND p_delta > 0
            AND v_used > (SELECT max_bytes FROM storage_quota WHERE id = 1) THEN
        PERFORM ts_raise('TSQTA', 'the owner''s stored data is at its quota', v_used::text);
    END IF;
END $$;

CREATE FUNCTION ts_quota_chats() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO owner_storage (owner) VALUES (NEW.owner) ON CONFLICT DO NOTHING;
        RETURN NULL;
    END IF;
    DELETE FROM chat_titles WHERE chat_id = OLD.id;
    RETURN OLD;
END $$;

CREATE FUNCTION ts_quota_turn_gone() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM turn_event_batches WHERE turn_id = OLD.id;
    RETURN OLD;
END $$;

CREATE FUNCTION ts_quota_messages() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        PERFORM ts_owner_grow(NEW.chat_id, {_MESSAGE_BYTES.format(row="NEW")},
                              NEW.role = 'user');
    ELSIF TG_OP = 'UPDATE' THEN
        PERFORM ts_owner_grow(NEW.chat_id, {_MESSAGE_BYTES.format(row="NEW")}
            - {_MESSAGE_BYTES.format(row="OLD")},
            OLD.status = 'completed' AND NEW.status = 'completed');
    ELSE
        PERFORM ts_owner_grow(OLD.chat_id, -{_MESSAGE_BYTES.format(row="OLD")}, false);
    END IF;
    RETURN NULL;
END $$;

CREATE FUNCTION ts_quota_titles() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        PERFORM ts_owner_grow(NEW.chat_id, octet_length(NEW.title), true);
    ELSIF TG_OP = 'UPDATE' THEN
        PERFORM ts_owner_grow(NEW.chat_id, octet_length(NEW.title) - octet_length(OLD.title),
                              true);
    ELSE
        PERFORM ts_owner_grow(OLD.chat_id, -octet_length(OLD.title), false);
    END IF;
    RETURN NULL;
END $$;

CREATE FUNCTION ts_quota_log() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        PERFORM ts_owner_grow((SELECT chat_id FROM turns WHERE id = NEW.turn_id),
                              octet_length(NEW.events), false);
    ELSE
        PERFORM ts_owner_grow((SELECT chat_id FROM turns WHERE id = OLD.turn_id),
                              -octet_length(OLD.events), false);
    END IF;
    RETURN NULL;
END $$;

-- The quota, and the triggers that count while one is set (dropped without one: no
-- write pays for counting then). A first quota counts every owner from the rows after
-- creating the triggers, whose locks keep other writers out until this transaction
-- ends; a change of the number only sets it.
CREATE FUNCTION ts_set_storage_quota(p_max bigint) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_before bigint;
BEGIN
    SELECT max_bytes INTO v_before FROM storage_quota WHERE id = 1 FOR UPDATE;
    UPDATE storage_quota SET max_bytes = p_max WHERE id = 1;
    IF v_before IS NOT NULL AND p_max IS NOT NULL THEN
        RETURN;
    END IF;
    DROP TRIGGER IF EXISTS quota_chat_new ON chats;
    DROP TRIGGER IF EXISTS quota_chat_gone ON chats;
    DROP TRIGGER IF EXISTS quota_turn_gone ON turns;
    DROP TRIGGER IF EXISTS quota_message_new ON messages;
    DROP TRIGGER IF EXISTS quota_message_changed ON messages;
    DROP TRIGGER IF EXISTS quota_titles ON chat_titles;
    DROP TRIGGER IF EXISTS quota_log ON turn_event_batches;
    DELETE FROM owner_storage;
    IF p_max IS NULL THEN
        RETURN;
    END IF;
    CREATE TRIGGER quota_chat_new AFTER INSERT ON chats
        FOR EACH ROW EXECUTE FUNCTION ts_quota_chats();
    CREATE TRIGGER quota_chat_gone BEFORE DELETE ON chats
        FOR EACH ROW EXECUTE FUNCTION ts_quota_chats();
    CREATE TRIGGER quota_turn_gone BEFORE DELETE ON turns
        FOR EACH ROW EXECUTE FUNCTION ts_quota_turn_gone();
    CREATE TRIGGER quota_message_new AFTER INSERT OR DELETE ON messages
        FOR EACH ROW EXECUTE FUNCTION ts_quota_messages();
    CREATE TRIGGER quota_message_changed AFTER UPDATE OF parts, provider_state, usage, media
        ON messages FOR EACH ROW
        WHEN (OLD.parts IS DISTINCT FROM NEW.parts
            OR OLD.provider_state IS DISTINCT FROM NEW.provider_state
            OR OLD.usage IS DISTINCT FROM NEW.usage OR OLD.media IS DISTINCT FROM NEW.media)
        EXECUTE FUNCTION ts_quota_messages();
    CREATE TRIGGER quota_titles AFTER INSERT OR UPDATE OR DELETE ON chat_titles
        FOR EACH ROW EXECUTE FUNCTION ts_quota_titles();
    CREATE TRIGGER quota_log AFTER INSERT OR DELETE ON turn_event_batches
        FOR EACH ROW EXECUTE FUNCTION ts_quota_log();
    INSERT INTO owner_storage (owner, used_bytes)
        SELECT c.owner, coalesce(sum({_CHAT_BYTES}), 0) FROM chats c GROUP BY c.owner;
END $$;
"""
"""Schema version 16 (``MIGRATIONS[15]``): the tables and functions; no trigger until a
quota is set."""

COUNTED_FROM_ROWS = f"SELECT coalesce(sum({_CHAT_BYTES}), 0) FROM chats c WHERE c.owner = $1"
QUOTA = "SELECT max_bytes FROM storage_quota WHERE id = 1"
SET_QUOTA = "SELECT ts_set_storage_quota($1)"
COUNTED = f"""SELECT CASE WHEN (SELECT max_bytes FROM storage_quota WHERE id = 1) IS NULL
    THEN (SELECT coalesce(sum({_CHAT_BYTES}), 0) FROM chats c WHERE c.owner = $1)
    ELSE (SELECT coalesce(max(used_bytes), 0) FROM owner_storage WHERE owner = $1) END"""
"""The owner's counter while a quota is set, else its bytes counted from the rows."""
