"""The PostgreSQL turn log's SQL: its tables as their migrations made them (schema
versions 6 and 9) and its statements (moved out of ``_postgres_log``, lifecycle6)."""

from __future__ import annotations

from turnstate.storage import _postgres_sql as q
from turnstate.storage._turn_log import FENCED_REASONS

V6 = """
CREATE TABLE turn_logs (
    turn_id text COLLATE "C" PRIMARY KEY REFERENCES turns (id) ON DELETE CASCADE,
    last_id integer NOT NULL DEFAULT 0 CHECK (last_id >= 0),
    truncated boolean NOT NULL DEFAULT false,
    expired boolean NOT NULL DEFAULT false,
    stop_requested_at timestamptz
);
CREATE INDEX turn_logs_unexpired ON turn_logs (turn_id) WHERE NOT expired;
CREATE TABLE turn_events (
    turn_id text COLLATE "C" NOT NULL REFERENCES turns (id) ON DELETE CASCADE,
    id integer NOT NULL CHECK (id > 0),
    type text COLLATE "C" NOT NULL,
    data text NOT NULL,
    PRIMARY KEY (turn_id, id)
);
"""

V9 = """
CREATE TABLE turn_event_batches (
    turn_id text COLLATE "C" NOT NULL REFERENCES turns (id) ON DELETE CASCADE,
    last_id integer NOT NULL,
    first_id integer NOT NULL CHECK (first_id > 0 AND first_id <= last_id),
    events text NOT NULL,
    PRIMARY KEY (turn_id, last_id)
);
INSERT INTO turn_event_batches (turn_id, last_id, first_id, events)
    SELECT turn_id, id, id, json_build_array(json_build_array(id, type, data))::text
    FROM turn_events;
DROP TABLE turn_events;
"""

_T = ", ".join(f"t.{name}" for name in q.TURN.split(", "))
def _fenced(turn: str) -> str:
    """SQL: the reason the lease of ``turn`` (a ``turns`` row's alias) was taken from it,
    else NULL."""
    return (f"CASE WHEN {turn}.status = 'aborted' AND {turn}.reason IN {FENCED_REASONS!r} "
            f"THEN {turn}.reason END")


_FENCED = _fenced("turns")
"""Whether a turn's lease was taken from it (``_turn_log.check_fence``): each append reads
its turn ``FOR SHARE``, so a reclaim's update of the turn is either before it (the
append is refused) or after it (the append was the holder's while it held the chat)."""
# $1 turn, $2 the events' rows (``pack_rows``), $3 new last id, $4 truncate, $5 first new
# id, $6 and $7 each row's first and last ids.
APPEND = f"""WITH t AS (SELECT id, {_FENCED} AS fenced FROM turns WHERE id = $1 FOR SHARE),
head AS (INSERT INTO turn_logs AS l (turn_id, last_id, truncated)
    SELECT id, $3, $4 FROM t WHERE fenced IS NULL
    ON CONFLICT (turn_id) DO UPDATE SET last_id = EXCLUDED.last_id,
        truncated = l.truncated OR EXCLUDED.truncated
    WHERE l.last_id < $5 RETURNING turn_id),
dropped AS (DELETE FROM turn_event_batches WHERE $4 AND turn_id = $1
    AND EXISTS (SELECT 1 FROM head)),
added AS (INSERT INTO turn_event_batches (turn_id, last_id, first_id, events)
    SELECT head.turn_id, r.last_id, r.first_id, r.events FROM head
    CROSS JOIN unnest($6::integer[], $7::integer[], $2::text[]) AS r(first_id, last_id, events))
SELECT (SELECT count(*) FROM t), (SELECT count(*) FROM head),
    (SELECT max(fenced) FROM t), pg_notify('turnstate', current_schema() || ' e ' || $1)"""
# $1 turn: a truncation with no events (the writer's tick after the cap dropped the kept
# ones): the stored events go and the header says so; its last id stays.
TRUNCATE = f"""WITH t AS (SELECT id, {_FENCED} AS fenced FROM turns WHERE id = $1 FOR SHARE),
head AS (INSERT INTO turn_logs AS l (turn_id, truncated) SELECT id, true FROM t
    WHERE fenced IS NULL
    ON CONFLICT (turn_id) DO UPDATE SET truncated = true RETURNING turn_id),
dropped AS (DELETE FROM turn_event_batches WHERE turn_id = $1 AND EXISTS (SELECT 1 FROM head))
SELECT (SELECT count(*) FROM t), (SELECT max(fenced) FROM t),
    pg_notify('turnstate', current_schema() || ' e ' || $1)"""
# ``APPEND`` for several turns, each at most once: per batch $1 turn, $2 first new id,
# $3 new last id, $4 truncate; per stored row (``pack_rows``) $5 its events, $6 its
# batch's place (from 1), $7 and $8 its first and last ids. Its turns are locked in
# their chats' order (``r``), the order in which ``ts_reclaim_expired`` updates them: in
# the batches' order a sweep reclaiming two of them could deadlock with it.
# One row per batch, in order: its turn known, its batch written.
APPEND_MANY = f"""WITH b AS (SELECT * FROM unnest($1::text[], $2::integer[], $3::integer[],
        $4::boolean[]) WITH ORDINALITY AS b(turn_id, first_id, last_id, truncate, n)),
r AS MATERIALIZED (SELECT id, {_FENCED} AS fenced FROM turns WHERE id = ANY ($1::text[])
    ORDER BY chat_id, id FOR SHARE),
t AS (SELECT b.*, r.fenced FROM b JOIN r ON r.id = b.turn_id),
head AS (INSERT INTO turn_logs AS l (turn_id, last_id, truncated)
    SELECT turn_id, last_id, truncate FROM t WHERE fenced IS NULL
    ON CONFLICT (turn_id) DO UPDATE SET last_id = EXCLUDED.last_id,
        truncated = l.truncated OR EXCLUDED.truncated
    WHERE l.last_id < (SELECT b.first_id FROM b WHERE b.turn_id = EXCLUDED.turn_id)
    RETURNING turn_id),
dropped AS (DELETE FROM turn_event_batches WHERE turn_id = ANY (ARRAY(
    SELECT b.turn_id FROM b WHERE b.truncate AND b.turn_id IN (SELECT turn_id FROM head)))),
added AS (INSERT INTO turn_event_batches (turn_id, last_id, first_id, events)
    SELECT b.turn_id, r.last_id, r.first_id, r.events
    FROM unnest($5::text[], $6::bigint[], $7::integer[], $8::integer[])
        AS r(events, n, first_id, last_id) JOIN b ON b.n = r.n
    WHERE b.turn_id IN (SELECT turn_id FROM head))
SELECT b.n, EXISTS (SELECT 1 FROM t WHERE t.n = b.n), b.turn_id IN (SELECT turn_id FROM head),
    (SELECT t.fenced FROM t WHERE t.n = b.n),
    CASE WHEN b.turn_id IN (SELECT turn_id FROM head)
        THEN pg_notify('turnstate', current_schema() || ' e ' || b.turn_id) END
    FROM b ORDER BY b.n"""
# $1 turn, $2 chat, $3 owner or NULL, $4 after, $5 limit or NULL, $6 the store's injected
# now or NULL (the database's time: what the follower compares the turn's end with). No
# batch is read past the first that reaches id ``$4 + $5`` (a batch of many events is not
# sent ``$5`` times over, follow12): ids follow one another but where the cap dropped
# events (there a page holds fewer, never none).
READ = f"""SELECT {_T}, c.owner, coalesce(l.last_id, 0), coalesce(l.truncated, false),
    coalesce(l.expired, false), l.stop_requested_at IS NOT NULL, e.batches, t.attached,
    coalesce($6, statement_timestamp())
    FROM turns t JOIN chats c ON c.id = t.chat_id LEFT JOIN turn_logs l ON l.turn_id = t.id
    LEFT JOIN LATERAL (SELECT array_agg(s.events ORDER BY s.last_id) AS batches
        FROM (SELECT last_id, events FROM turn_event_batches WHERE turn_id = t.id
              AND last_id > $4 AND last_id <= coalesce((SELECT min(r.last_id)
                  FROM turn_event_batches r WHERE r.turn_id = t.id AND r.last_id >= $4 + $5),
                  2147483647)
              ORDER BY last_id LIMIT $5) s) e ON true
    WHERE t.id = $1 AND t.chat_id = $2 AND ($3::text IS NULL OR c.owner = $3)"""
REQUEST_STOP = f"""WITH t AS (SELECT {_T} FROM turns t JOIN chats c ON c.id = t.chat_id
        WHERE t.id = $1 AND t.chat_id = $2 AND ($3::text IS NULL OR c.owner = $3)),
head AS (INSERT INTO turn_logs AS l (turn_id, stop_requested_at)
    SELECT id, coalesce($4, now()) FROM t WHERE status = 'in_progress'
    ON CONFLICT (turn_id) DO UPDATE SET stop_requested_at = coalesce(l.stop_requested_at,
        EXCLUDED.stop_requested_at) RETURNING turn_id)
SELECT t.*, (SELECT count(*) FROM head) AS stopping,
    CASE WHEN EXISTS (SELECT 1 FROM head)
        THEN pg_notify('turnstate', current_schema() || ' s ' || $1) END
    FROM t"""
ANNOUNCE_FENCED = """SELECT pg_notify('turnstate', current_schema() || ' f ' || t)
    FROM unnest($1::text[]) t"""
"""Turns whose lease was taken from them (an operator's release, a reclaim): their
nodes stop them now."""
STOP_REQUESTS = """SELECT turn_id FROM turn_logs WHERE turn_id = ANY($1::text[])
    AND stop_requested_at IS NOT NULL"""
# The sweep reads the unexpired logs (``turn_logs_unexpired``) and each one's turn by its
# key (a scalar subquery is never turned into a join, so no plan scans every turn), and
# deletes the doomed logs' events off the primary key (``= ANY (ARRAY(...))``: the
# planner cannot guess a CTE's row count, and with ``IN`` it scanned every event).
EXPIRE = """WITH doomed AS (UPDATE turn_logs l SET expired = true WHERE NOT l.expired AND
        (SELECT t.status <> 'in_progress'
            AND t.ended_at < coalesce($1, statement_timestamp() - $2::interval)
            FROM turns t WHERE t.id = l.turn_id)
    RETURNING turn_id),
gone AS (DELETE FROM turn_event_batches WHERE turn_id = ANY (ARRAY(SELECT turn_id FROM doomed)))
SELECT count(*) FROM doomed"""
