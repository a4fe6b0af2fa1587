"""The PostgreSQL turn log's tables as their migrations made them (schema versions 6
and 9; moved out of ``_postgres_log``, lifecycle6)."""

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
