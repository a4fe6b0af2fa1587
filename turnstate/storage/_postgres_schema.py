"""PostgreSQL schema migrations: an ordered list, applied at open under an advisory lock.

``MIGRATIONS[i]`` creates schema version ``i + 1`` inside the store's own PostgreSQL
schema (``turnstate`` unless told otherwise), so tests and tenants can keep several side
by side. ``migrate`` takes a transaction-scoped advisory lock keyed on the schema name,
then re-reads ``schema_migrations`` and applies what is missing in the same
transaction: two processes opening at once migrate exactly once, and a failed migration
leaves nothing behind. A migration is never edited once released: a change is a new
entry at the end.

Times come from the database's clock: ``clock_timestamp()``, read once the function
holds the chat's row, so a turn that waited for another's commit starts after it ended
(the tests inject a clock instead, through each function's ``p_now``).

Version 1 is the tables of DESIGN.md section 4 plus the ``turns`` audit table (the
SQLite schema's versions 1 and 2 together): ``jsonb`` for parts, states, snapshots and
paths, ``timestamptz`` for times, text ids in the ``C`` collation (code point order, as
the other stores sort). Version 2 is the server-side functions that make each turn
write one statement (see ``_postgres_sql``). Version 3 adds the chat's ``committed_seq``
and ``history_chars`` (``_protocol``), filled for existing chats and kept by the commit
and history-change functions, which it replaces.
Version 3's text lives in ``_postgres_counters``. Version 4 (``_postgres_owners``) checks
the chat's owner inside the functions and adds the chat server's deletes. Version 5
(``_postgres_fence``) adds the lease epoch and the fenced turn writes. Version 6
(``_postgres_log``) adds the turn-events log. Version 7 (``_postgres_begin``) makes begin
return the chat row it leased. Version 8 (``_postgres_media``) counts images and files
towards ``history_chars``.
Version 9 (``_postgres_log``) keeps the turn-events log one row per write of a turn.
Version 10 (``_postgres_replace``) adds the begin that deletes the chat's tail first.
Version 11 (``_postgres_busy``) refuses a message's edit or delete under a live lease.
Version 12 (``_postgres_billed``) adds the abort that keeps what the turn billed.
Version 13 (``_postgres_titles``) adds chat titles and the create bounded per owner.
Version 14 (``_postgres_media``) keeps a message's media bytes apart from its parts.
Version 15 (``_postgres_reclaimed``) marks a reclaimed turn's answer "cost unknown" and
takes the late bill of the turn that lost its lease.
Version 16 (``_postgres_quota``) counts the bytes each owner stores.
Version 17 (``_postgres_v17``) locks a chat's turns by id before its deletes, and marks
the turns that run attached (``turns.attached``).
Version 18 (``_postgres_v18``) keeps a turn's client key (``turns.client_key``).
Version 19 (``_postgres_v19``) checks the message an edit or a delete from a seq expects
there in its write, and stamps an edit strictly later than the message's last change.
"""

from __future__ import annotations

import math
import re

import asyncpg
from asyncpg.pool import PoolConnectionProxy

from turnstate.core._errors import ConfigurationError, StorageError
from turnstate.storage._postgres_begin import V7
from turnstate.storage._postgres_billed import V12
from turnstate.storage._postgres_busy import V11
from turnstate.storage._postgres_counters import V3
from turnstate.storage._postgres_fence import V5
from turnstate.storage._postgres_log_sql import V6, V9
from turnstate.storage._postgres_media import V8, V14
from turnstate.storage._postgres_owners import V4
from turnstate.storage._postgres_quota import V16
from turnstate.storage._postgres_reclaimed import V15
from turnstate.storage._postgres_replace import V10
from turnstate.storage._postgres_titles import V13
from turnstate.storage._postgres_v17 import V17
from turnstate.storage._postgres_v18 import V18
from turnstate.storage._postgres_v19 import V19

MIGRATION_LOCK = 0x7475726E  # "turn": the advisory-lock class of every turnstate schema
_SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")

# Stored provider states never hold a stateless-loop mode or loop messages: the store
# refuses them in code, and these checks refuse them again for any writer of the schema.
_NO_LOOP_STATE = """({column} IS NULL OR (strpos({column}::text, '"stateless-loop"') = 0
        AND strpos({column}::text, '"loopMessages"') = 0))"""

_V1 = f"""
CREATE TABLE chats (
    id text COLLATE "C" PRIMARY KEY,
    owner text COLLATE "C" NOT NULL,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    version bigint NOT NULL DEFAULT 0 CHECK (version >= 0),
    last_provider_state jsonb CHECK {_NO_LOOP_STATE.format(column="last_provider_state")},
    last_context_state jsonb,
    active_turn_id text COLLATE "C",
    active_turn_expires_at timestamptz,
    CHECK ((active_turn_id IS NULL) = (active_turn_expires_at IS NULL))
);
CREATE TABLE messages (
    id text COLLATE "C" PRIMARY KEY,
    chat_id text COLLATE "C" NOT NULL REFERENCES chats (id),
    seq integer NOT NULL CHECK (seq > 0),
    role text NOT NULL CHECK (role IN ('user', 'assistant')),
    status text NOT NULL CHECK (status IN ('in_progress', 'completed', 'aborted')),
    parts jsonb NOT NULL CHECK (jsonb_typeof(parts) = 'array'),
    provider_state jsonb CHECK {_NO_LOOP_STATE.format(column="provider_state")},
    usage jsonb,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    UNIQUE (chat_id, seq)
);
CREATE TABLE turns (
    id text COLLATE "C" PRIMARY KEY,
    chat_id text COLLATE "C" NOT NULL REFERENCES chats (id),
    user_message_id text COLLATE "C" REFERENCES messages (id) ON DELETE SET NULL,
    assistant_message_id text COLLATE "C" REFERENCES messages (id) ON DELETE SET NULL,
    user_seq integer NOT NULL,
    assistant_seq integer NOT NULL,
    status text NOT NULL CHECK (status IN ('in_progress', 'completed', 'aborted')),
    provider text COLLATE "C" NOT NULL,
    model text COLLATE "C" NOT NULL,
    strategy text COLLATE "C",
    reason text COLLATE "C",
    detail text COLLATE "C",
    path jsonb NOT NULL DEFAULT '[]' CHECK (jsonb_typeof(path) = 'array'),
    started_at timestamptz NOT NULL,
    ended_at timestamptz,
    begun bigint GENERATED ALWAYS AS IDENTITY
);
CREATE INDEX turns_by_chat ON turns (chat_id, begun);
CREATE INDEX turns_by_user_message ON turns (user_message_id);
CREATE INDEX turns_by_assistant_message ON turns (assistant_message_id);
CREATE INDEX chats_by_owner ON chats (owner, updated_at);
CREATE INDEX chats_by_lease_expiry ON chats (active_turn_expires_at)
    WHERE active_turn_id IS NOT NULL;
"""

_ERRORS = """
-- Expected refusals carry their own SQLSTATEs (class TS); the store maps them to the
-- error tree. DETAIL holds the id or version the Python error needs.
CREATE FUNCTION ts_raise(code text, message text, detail text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION USING ERRCODE = code, MESSAGE = message, DETAIL = detail;
END $$;

CREATE FUNCTION ts_reclaim_turn(p_turn text, p_now timestamptz) RETURNS void
LANGUAGE sql AS $$
    UPDATE messages SET status = 'aborted', updated_at = p_now
        WHERE id IN (p_turn || ':user', p_turn || ':assistant') AND status = 'in_progress';
    UPDATE turns SET status = 'aborted', reason = 'lease_expired', ended_at = p_now
        WHERE id = p_turn AND status = 'in_progress';
$$;
"""

_BEGIN = """
CREATE FUNCTION ts_begin_turn(p_chat text, p_turn text, p_parts jsonb, p_provider text,
    p_model text, p_now timestamptz, p_lease interval,
    OUT version bigint, OUT seq integer, OUT expires_at timestamptz,
    OUT reclaimed_turn text, OUT reclaimed_expires_at timestamptz)
LANGUAGE plpgsql AS $$
DECLARE
    v_now timestamptz;
    v_active text;
BEGIN
    SELECT c.version, c.active_turn_id, c.active_turn_expires_at
        INTO version, v_active, reclaimed_expires_at
        FROM chats c WHERE c.id = p_chat FOR UPDATE;
    v_now := coalesce(p_now, clock_timestamp());  -- once the row is ours
    IF NOT FOUND THEN
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

CREATE FUNCTION ts_record_transition(p_chat text, p_turn text, p_base_version bigint,
    p_part jsonb, p_clear boolean, p_now timestamptz) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_now timestamptz;
    v_version bigint;
    v_active text;
BEGIN
    SELECT version, active_turn_id INTO v_version, v_active FROM chats
        WHERE id = p_chat FOR UPDATE;
    v_now := coalesce(p_now, clock_timestamp());  -- once the row is ours
    IF NOT FOUND THEN
        PERFORM ts_raise('TSNFC', 'no such chat', p_chat);
    END IF;
    UPDATE messages SET parts = parts || jsonb_build_array(p_part), updated_at = v_now
        WHERE id = p_turn || ':assistant' AND status = 'in_progress'
          AND v_active IS NOT DISTINCT FROM p_turn;
    IF NOT FOUND THEN
        PERFORM ts_raise('TSCNF', 'the turn no longer holds the chat', v_version::text);
    END IF;
    IF p_clear THEN
        UPDATE chats SET last_provider_state = NULL, updated_at = v_now WHERE id = p_chat;
    END IF;
END $$;
"""

_COMMIT = """
CREATE FUNCTION ts_commit_turn(p_chat text, p_turn text, p_base_version bigint,
    p_parts jsonb, p_audit jsonb, p_usage jsonb, p_state jsonb, p_context jsonb,
    p_strategy text, p_path jsonb, p_now timestamptz) RETURNS SETOF chats
LANGUAGE plpgsql AS $$
DECLARE
    v_now timestamptz := coalesce(p_now, clock_timestamp());
    v_chat chats;
    v_done integer;
    v_more integer;
BEGIN
    -- The compare-and-swap: no row unless the version and the lease are still the turn's.
    UPDATE chats SET last_provider_state = p_state, last_context_state = p_context,
        active_turn_id = NULL, active_turn_expires_at = NULL, version = version + 1,
        updated_at = v_now
        WHERE id = p_chat AND version = p_base_version AND active_turn_id = p_turn
        RETURNING * INTO v_chat;
    IF NOT FOUND THEN
        SELECT version INTO v_done FROM chats WHERE id = p_chat;
        IF NOT FOUND THEN
            PERFORM ts_raise('TSNFC', 'no such chat', p_chat);
        END IF;
        PERFORM ts_raise('TSCNF', 'the chat changed during the turn', v_done::text);
    END IF;
    UPDATE messages SET status = 'completed', parts = p_parts, provider_state = p_audit,
        usage = p_usage, updated_at = v_now
        WHERE id = p_turn || ':assistant' AND status = 'in_progress';
    GET DIAGNOSTICS v_done = ROW_COUNT;
    UPDATE messages SET status = 'completed', updated_at = v_now
        WHERE id = p_turn || ':user' AND status = 'in_progress';
    GET DIAGNOSTICS v_more = ROW_COUNT;
    IF v_done + v_more <> 2 THEN
        PERFORM ts_raise('TSCNF', 'the turn''s messages changed', p_base_version::text);
    END IF;
    UPDATE turns SET status = 'completed', strategy = p_strategy, path = p_path,
        ended_at = v_now WHERE id = p_turn;
    RETURN NEXT v_chat;
END $$;

CREATE FUNCTION ts_abort_turn(p_chat text, p_turn text, p_parts jsonb, p_reason text,
    p_detail text, p_strategy text, p_path jsonb, p_now timestamptz) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_now timestamptz;
    v_active text;
BEGIN
    -- Only what is still this turn's: a reclaimed turn was already aborted, and the
    -- chat may by now be leased to another turn.
    SELECT active_turn_id INTO v_active FROM chats WHERE id = p_chat FOR UPDATE;
    v_now := coalesce(p_now, clock_timestamp());  -- once the row is ours
    IF NOT FOUND THEN
        PERFORM ts_raise('TSNFC', 'no such chat', p_chat);
    END IF;
    UPDATE messages SET status = 'aborted', updated_at = v_now
        WHERE id = p_turn || ':user' AND status = 'in_progress';
    UPDATE messages SET status = 'aborted', parts = coalesce(p_parts, parts),
        updated_at = v_now WHERE id = p_turn || ':assistant' AND status = 'in_progress';
    UPDATE turns SET status = 'aborted', reason = p_reason, detail = p_detail,
        strategy = coalesce(p_strategy, strategy), path = p_path, ended_at = v_now
        WHERE id = p_turn AND status = 'in_progress';
    IF v_active IS NOT DISTINCT FROM p_turn THEN
        UPDATE chats SET active_turn_id = NULL, active_turn_expires_at = NULL,
            updated_at = v_now WHERE id = p_chat;
    END IF;
END $$;
"""

_CHANGES = """
CREATE FUNCTION ts_change_history(p_chat text, p_kind text, p_seq integer, p_parts jsonb,
    p_now timestamptz) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_now timestamptz := coalesce(p_now, clock_timestamp());
BEGIN
    UPDATE chats SET last_provider_state = NULL, version = version + 1, updated_at = v_now
        WHERE id = p_chat;
    IF NOT FOUND THEN
        PERFORM ts_raise('TSNFC', 'no such chat', p_chat);
    END IF;
    IF p_kind = 'edit' THEN
        UPDATE messages SET parts = p_parts, updated_at = v_now
            WHERE chat_id = p_chat AND seq = p_seq;
    ELSIF p_kind = 'delete' THEN
        DELETE FROM messages WHERE chat_id = p_chat AND seq = p_seq;
    ELSE
        RETURN;
    END IF;
    IF NOT FOUND THEN
        PERFORM ts_raise('TSNFM', 'no such message', p_seq::text);
    END IF;
END $$;

CREATE FUNCTION ts_reclaim_expired(p_now timestamptz,
    OUT chat_id text, OUT turn_id text, OUT expires_at timestamptz) RETURNS SETOF record
LANGUAGE plpgsql AS $$
DECLARE
    v_now timestamptz := coalesce(p_now, clock_timestamp());
BEGIN
    -- SKIP LOCKED: a chat another transaction holds is being begun (which reclaims it
    -- itself) or committed; waiting for it would only serialise two sweepers.
    FOR chat_id, turn_id, expires_at IN
        SELECT c.id, c.active_turn_id, c.active_turn_expires_at FROM chats c
            WHERE c.active_turn_id IS NOT NULL AND c.active_turn_expires_at <= v_now
            ORDER BY c.id FOR UPDATE SKIP LOCKED
    LOOP
        PERFORM ts_reclaim_turn(turn_id, v_now);
        UPDATE chats SET active_turn_id = NULL, active_turn_expires_at = NULL,
            updated_at = v_now WHERE id = chat_id;
        RETURN NEXT;
    END LOOP;
END $$;
"""

MIGRATIONS: tuple[str, ...] = (_V1, _ERRORS + _BEGIN + _COMMIT + _CHANGES, V3, V4, V5, V6,
                               V7, V8, V9, V10, V11, V12, V13, V14, V15, V16,
                               V17, V18, V19)
"""The schema, version by version: ``MIGRATIONS[i]`` creates version ``i + 1``."""

LATEST_VERSION = len(MIGRATIONS)


def check_schema_name(schema: str) -> str:
    """``schema`` itself if it is a plain lower-case identifier; it is spliced into SQL."""
    if not _SCHEMA_NAME.fullmatch(schema):
        msg = f"schema must match [a-z_][a-z0-9_]*, at most 63 characters; got {schema!r}"
        raise ConfigurationError(msg)
    return schema


def check_pool_options(pool_min: object, pool_max: object, acquire_timeout: object,
                       statement_timeout: object, command_timeout: object = None) -> None:
    """``PostgresStore.open``'s numbers: whole connection counts with
    ``1 <= pool_min <= pool_max``, positive finite seconds (a negative
    ``statement_timeout`` became a 1 ms timeout on every statement; a string raised a
    bare ``TypeError`` after the pool was made).

    Raises:
        ConfigurationError: naming the option.
    """
    if type(pool_min) is not int or type(pool_max) is not int \
            or not 1 <= pool_min <= pool_max:
        msg = f"need 1 <= pool_min <= pool_max, whole numbers, got {pool_min!r} and {pool_max!r}"
        raise ConfigurationError(msg)
    for name, seconds in (("acquire_timeout", acquire_timeout),
                          ("statement_timeout", statement_timeout),
                          ("command_timeout", command_timeout)):
        if seconds is None and name != "acquire_timeout":
            continue
        if isinstance(seconds, bool) or not isinstance(seconds, int | float) \
                or not 0 < seconds < math.inf:
            msg = f"{name} must be a positive number of seconds, got {seconds!r}"
            raise ConfigurationError(msg)


async def require_current(conn: asyncpg.Connection | PoolConnectionProxy, schema: str) -> None:
    """Check, without writing, that ``schema`` holds the current version (read-only open).

    Raises:
        StorageError: no such schema, or one of another version.
    """
    check_schema_name(schema)
    table = await conn.fetchval("SELECT to_regclass($1)", f"{schema}.schema_migrations")
    version = 0 if table is None else await conn.fetchval(
        f"SELECT coalesce(max(version), 0) FROM {schema}.schema_migrations")
    if version != LATEST_VERSION:
        msg = (f"schema {schema!r} is at version {version}, this turnstate reads version "
               f"{LATEST_VERSION} (nothing was created or migrated)")
        raise StorageError(msg)


async def migrate(conn: asyncpg.Connection | PoolConnectionProxy, schema: str) -> tuple[int, ...]:
    """Create ``schema`` if needed and apply every missing migration; returns those applied.

    Raises:
        StorageError: the schema was written by a newer turnstate.
    """
    check_schema_name(schema)
    applied: list[int] = []
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock($1, hashtext($2))",
                           MIGRATION_LOCK, schema)
        await conn.execute(f"CREATE SCHEMA IF NOT EXISTS {schema}; "
                           f"SET LOCAL search_path = {schema}; "
                           "CREATE TABLE IF NOT EXISTS schema_migrations ("
                           "version integer PRIMARY KEY, "
                           "applied_at timestamptz NOT NULL DEFAULT now())")
        current = await conn.fetchval("SELECT coalesce(max(version), 0) FROM schema_migrations")
        if current > LATEST_VERSION:
            msg = (f"schema {schema!r} is at version {current}, newer than this turnstate "
                   f"supports ({LATEST_VERSION})")
            raise StorageError(msg)
        for version in range(current + 1, LATEST_VERSION + 1):
            await conn.execute(MIGRATIONS[version - 1])
            await conn.execute("INSERT INTO schema_migrations (version) VALUES ($1)", version)
            applied.append(version)
    return tuple(applied)
