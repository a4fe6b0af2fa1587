"""``turnstate serve``: the reference chat server and its page (see docs/server.md)."""

from __future__ import annotations

import argparse
from pathlib import Path

from turnstate.commands._common import CliError, Subparsers, port_number, store_target, web_origin
from turnstate.engine._limits import DEFAULT_TURN_SECONDS
from turnstate.server import ServeOptions, run_server
from turnstate.server._config import DEFAULT_MAX_CHATS
from turnstate.server._logging import LOG_FORMATS, LOG_LEVELS
from turnstate.server._shutdown import DEFAULT_SHUTDOWN_GRACE
from turnstate.storage import DEFAULT_LEASE_SECONDS


def add_parser(commands: Subparsers) -> None:
    serve = commands.add_parser(
        "serve", help="run the reference chat server and web page",
        description="Run the reference chat server: a JSON + SSE API over the engine and a "
                    "chat page at /, with the provider emulators (default) or live "
                    "providers. See docs/server.md.")
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default: "
                                                           "127.0.0.1, loopback only)")
    serve.add_argument("--port", type=port_number, default=8080, help="port (default 8080; 0: a "
                                                              "free one)")
    serve.add_argument("--db", default="turnstate.sqlite", metavar="PATH|DSN", type=store_target,
                       help="SQLite file or postgresql:// DSN (default ./turnstate.sqlite)")
    mode = serve.add_mutually_exclusive_group()
    mode.add_argument("--emulated", dest="live", action="store_false", default=False,
                      help="run the five provider emulators in-process (default)")
    mode.add_argument("--live", dest="live", action="store_true",
                      help="use the real providers whose keys are in the environment")
    serve.add_argument("--tokens", type=Path, metavar="FILE",
                       help="'owner: token' lines (default ./turnstate-tokens, created "
                            "with one token for the owner 'local' when missing)")
    serve.add_argument("--cors-origin", metavar="ORIGIN", type=web_origin,
                       help="allow this one origin cross-origin access, as the browser "
                            "sends it: scheme://host[:port] (default: none)")
    serve.add_argument("--max-body-bytes", type=int, default=1024 * 1024,
                       help="largest request body (default 1 MiB)")
    serve.add_argument("--max-text-chars", type=int, default=100_000,
                       help="longest user text or system prompt (default 100000)")
    serve.add_argument("--allowed-host", dest="allowed_hosts", action="append", default=[],
                       metavar="NAME", help="a Host name /healthz and /metrics answer "
                       "(repeatable; default: any). Guards them against DNS rebinding")
    serve.add_argument("--log-level", choices=LOG_LEVELS, default="warning",
                       help="log on stderr from this level (default warning: 500s, "
                            "aborted turns, reclaimed leases, accept failures)")
    serve.add_argument("--log-format", choices=LOG_FORMATS, default="text",
                       help="one line per event: text or a JSON object (default text)")
    serve.add_argument("--lease-seconds", type=float, default=DEFAULT_LEASE_SECONDS,
                       help="how long a turn holds its chat without a heartbeat (default "
                            f"{DEFAULT_LEASE_SECONDS:g}; renewed every third of it)")
    serve.add_argument("--turn-deadline", type=float, default=DEFAULT_TURN_SECONDS,
                       metavar="SECONDS",
                       help="how long one turn may run before it ends aborted with "
                            "reason deadline_exceeded (default "
                            f"{DEFAULT_TURN_SECONDS:g}; 'inf': none)")
    serve.add_argument("--cancel-on-disconnect", action="store_true",
                       help="cancel a turn when the client that started it leaves (by "
                            "default it runs on to its end and can be resumed)")
    serve.add_argument("--turn-log-retention", type=float, default=600.0, metavar="SECONDS",
                       help="keep a finished turn's events for resuming this long "
                            "(default 600)")
    serve.add_argument("--pg-pool-min", type=int, default=1, metavar="N",
                       help="PostgreSQL: connections the pool keeps open (default 1)")
    serve.add_argument("--pg-pool-max", type=int, default=10, metavar="N",
                       help="PostgreSQL: most connections the pool opens (default 10); "
                            "a turn holds one per store call, so turns past this many "
                            "wait for one (503 storage_unavailable after 10 s)")
    serve.add_argument("--pg-statement-timeout", type=float, default=30.0, metavar="SECONDS",
                       help="PostgreSQL: how long one statement may run (default 30; the "
                            "store gives a silent database 5 s more, then answers 503)")
    serve.add_argument("--pg-acquire-timeout", type=float, default=10.0, metavar="SECONDS",
                       help="PostgreSQL: how long a store call waits for a pooled "
                            "connection (default 10; 503 storage_unavailable after it)")
    serve.add_argument("--max-streams-per-owner", type=int, default=64, metavar="N",
                       help="streams (turns, resumes) one owner may have open at once on "
                            "this server (default 64; 429 too_many_streams above)")
    serve.add_argument("--max-turns-per-owner", type=int, default=32, metavar="N",
                       help="turns one owner may have running at once on this server, "
                            "their clients gone or not (default 32; 429 too_many_turns)")
    serve.add_argument("--max-large-bodies-per-owner", type=int, default=2, metavar="N",
                       help="turns with a body over --max-body-bytes (inline images and "
                            "files) one owner may have read or running at once on this "
                            "server (default 2; 429 too_many_large_bodies above)")
    serve.add_argument("--max-chats-per-owner", type=int, default=DEFAULT_MAX_CHATS,
                       metavar="N",
                       help=f"chats one owner may keep, counted in the database (default "
                            f"{DEFAULT_MAX_CHATS:,}; 409 too_many_chats above)")
    serve.add_argument("--max-stored-bytes-per-owner", type=int, default=None, metavar="N",
                       help="bytes one owner's chats may hold (messages, media, event "
                            "logs, titles), kept in the database for every server using it; "
                            "a turn past it is refused with 409 storage_quota_exceeded "
                            "before any provider call (default: the database's setting, "
                            "none at first)")
    serve.add_argument("--shutdown-grace", type=float, default=DEFAULT_SHUTDOWN_GRACE,
                       metavar="SECONDS",
                       help="the most the shutdown (SIGTERM, SIGINT) may take: ending "
                            "in-flight turns, their last writes, closing the store (default "
                            f"{DEFAULT_SHUTDOWN_GRACE:g}, within Kubernetes' 30 s); what the "
                            "database did not take by then is logged per turn")
    serve.add_argument("--otel-console", action="store_true",
                       help="print an OpenTelemetry span per turn, state and provider "
                            "request to the console (needs opentelemetry-sdk)")


def run(args: argparse.Namespace) -> int:
    if args.max_body_bytes < 1 or args.max_text_chars < 1:
        msg = "--max-body-bytes and --max-text-chars must be positive"
        raise CliError(msg)
    if not 0 < args.lease_seconds < 86_400 * 365:
        msg = "--lease-seconds must be a positive number of seconds (below a year)"
        raise CliError(msg)
    if not args.turn_deadline > 0:  # NaN, 0 and below refused; inf: no deadline
        msg = "--turn-deadline must be a positive number of seconds (or inf)"
        raise CliError(msg)
    if not 0 < args.turn_log_retention < 10**7:
        msg = "--turn-log-retention must be a positive number of seconds"
        raise CliError(msg)
    if min(args.max_streams_per_owner, args.max_turns_per_owner,
           args.max_large_bodies_per_owner, args.max_chats_per_owner) < 1:
        msg = ("--max-streams-per-owner, --max-turns-per-owner, --max-large-bodies-per-owner "
               "and --max-chats-per-owner must be positive")
        raise CliError(msg)
    if args.max_stored_bytes_per_owner is not None and not (
            0 <= args.max_stored_bytes_per_owner < 2**63):
        msg = "--max-stored-bytes-per-owner must be a number of bytes (0 or more)"
        raise CliError(msg)
    if not (0 < args.pg_statement_timeout < 10**6 and 0 < args.pg_acquire_timeout < 10**6):
        msg = "--pg-statement-timeout and --pg-acquire-timeout must be positive seconds"
        raise CliError(msg)
    if not 0 < args.shutdown_grace < 86_400:
        msg = "--shutdown-grace must be a positive number of seconds (below a day)"
        raise CliError(msg)
    if not 1 <= args.pg_pool_min <= args.pg_pool_max:
        msg = "need 1 <= --pg-pool-min <= --pg-pool-max"
        raise CliError(msg)
    options = ServeOptions(host=args.host, port=args.port, db=args.db, live=args.live,
                           tokens=args.tokens, cors_origin=args.cors_origin,
                           max_body_bytes=args.max_body_bytes,
                           max_text_chars=args.max_text_chars,
                           otel_console=args.otel_console, log_level=args.log_level,
                           log_format=args.log_format,
                           allowed_hosts=tuple(args.allowed_hosts),
                           lease_seconds=args.lease_seconds,
                           turn_seconds=args.turn_deadline,
                           cancel_on_disconnect=args.cancel_on_disconnect,
                           turn_log_retention=args.turn_log_retention,
                           pg_pool_min=args.pg_pool_min, pg_pool_max=args.pg_pool_max,
                           pg_statement_timeout=args.pg_statement_timeout,
                           pg_acquire_timeout=args.pg_acquire_timeout,
                           max_streams_per_owner=args.max_streams_per_owner,
                           max_turns_per_owner=args.max_turns_per_owner,
                           max_large_bodies_per_owner=args.max_large_bodies_per_owner,
                           max_chats_per_owner=args.max_chats_per_owner,
                           max_stored_bytes_per_owner=args.max_stored_bytes_per_owner,
                           shutdown_grace=args.shutdown_grace)
    try:
        return run_server(options)
    except OSError as exc:
        msg = f"cannot listen on {args.host}:{args.port}: {exc.strerror or exc}"
        raise CliError(msg) from exc
