"""PostgreSQL schema version 13: chat titles, and a create bounded per owner.

Titles live in their own table, beside the chat row rather than in it: renaming a chat
touches none of the columns a turn reads and writes, and deleting the chat deletes its
title (``ON DELETE CASCADE``). ``ts_create_chat`` counts the owner's chats after taking
a transaction advisory lock on the owner (class ``OWNER_LOCK``): concurrent creates of
one owner, from any process, count one after the other's commit, so ``max_chats`` holds.
Each statement of a PL/pgSQL function reads a fresh snapshot under READ COMMITTED, so the
count taken after the lock sees the creates that held it before.
"""

from __future__ import annotations

OWNER_LOCK = 0x6F776E72  # "ownr": the advisory-lock class of an owner's chat count

V13 = f"""
CREATE TABLE chat_titles (
    chat_id text PRIMARY KEY REFERENCES chats (id) ON DELETE CASCADE,
    title text NOT NULL
);

CREATE FUNCTION ts_create_chat(p_chat text, p_owner text, p_now timestamptz,
    p_max integer) RETURNS SETOF chats
LANGUAGE plpgsql AS $$
BEGIN
    IF p_max IS NOT NULL THEN
        PERFORM pg_advisory_xact_lock({OWNER_LOCK}, hashtext(p_owner));
        IF (SELECT count(*) FROM chats WHERE owner = p_owner) >= p_max THEN
            PERFORM ts_raise('TSLIM', 'the owner has the most chats allowed', p_max::text);
        END IF;
    END IF;
    RETURN QUERY INSERT INTO chats (id, owner, created_at, updated_at)
        VALUES (p_chat, p_owner, coalesce(p_now, now()), coalesce(p_now, now()))
        RETURNING *;
END $$;

-- Set (p_title) or remove (NULL) a chat's title; TSNFC as the other functions.
CREATE FUNCTION ts_rename_chat(p_chat text, p_title text, p_owner text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM 1 FROM chats WHERE id = p_chat AND (p_owner IS NULL OR owner = p_owner)
        FOR KEY SHARE;
    IF NOT FOUND THEN
        PERFORM ts_raise('TSNFC', 'no such chat', p_chat);
    END IF;
    IF p_title IS NULL THEN
        DELETE FROM chat_titles WHERE chat_id = p_chat;
    ELSE
        INSERT INTO chat_titles (chat_id, title) VALUES (p_chat, p_title)
            ON CONFLICT (chat_id) DO UPDATE SET title = excluded.title;
    END IF;
END $$;
"""
"""Schema version 13 (``MIGRATIONS[12]``)."""

RENAME_CHAT = "SELECT ts_rename_chat($1, $2, $3)"
CHAT_TITLES = """SELECT t.chat_id, t.title FROM chat_titles t JOIN chats c ON c.id = t.chat_id
    WHERE c.owner = $1 AND t.chat_id = ANY($2::text[])"""

