"""``turnstate serve``: the reference server in the foreground until SIGINT or SIGTERM.

Startup opens the store (reclaiming leases of crashed turns), starts the emulators (or
builds live adapters), binds the site and prints the URL to open. Shutdown stops
accepting connections, cancels in-flight turns (each ends ``aborted`` with ``cancelled``
and releases its lease), then closes the transport, the store and the emulators; all of
it within ``--shutdown-grace`` seconds (``_shutdown``: what the store did not take by
then is logged, one line per turn, and given up).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
import signal
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import TextIO

import attrs
from aiohttp import web

from turnstate.core._errors import ConfigurationError
from turnstate.emulators._emulated import EmulatedProviders
from turnstate.engine import TurnEngine, TurnLimits, console_tracing
from turnstate.engine._limits import DEFAULT_TURN_SECONDS
from turnstate.providers._protocol import ProviderAdapter
from turnstate.providers._transport import AiohttpTransport
from turnstate.server._app import SERVER_REGISTRY, create_app, make_services
from turnstate.server._config import (
    DEFAULT_MAX_CHATS,
    DEFAULT_TOKENS_FILE,
    ServerConfig,
    create_tokens_file,
    load_tokens,
)
from turnstate.server._logging import server_logging
from turnstate.server._providers import LIVE_KEYS, live_adapters
from turnstate.server._runner import TurnstateRunner
from turnstate.server._shutdown import (
    DEFAULT_SHUTDOWN_GRACE,
    ShutdownBudget,
    finish_by,
)
from turnstate.server._sockets import (
    AcceptFailures,
    private_sqlite_file,
    raise_open_files_limit,
)
from turnstate.storage import DEFAULT_LEASE_SECONDS, open_store, redact_dsn
from turnstate.storage._quota import QuotaStore

logger = logging.getLogger("turnstate")


@attrs.frozen(kw_only=True)
class ServeOptions:
    host: str = "127.0.0.1"
    port: int = 8080
    db: str = "turnstate.sqlite"
    live: bool = False
    tokens: Path | None = None
    cors_origin: str | None = None
    max_body_bytes: int = 1024 * 1024
    max_text_chars: int = 100_000
    otel_console: bool = False
    log_level: str = "warning"
    log_format: str = "text"
    allowed_hosts: tuple[str, ...] = ()
    lease_seconds: float = DEFAULT_LEASE_SECONDS
    turn_seconds: float = DEFAULT_TURN_SECONDS  # ``TurnLimits.turn_seconds``
    cancel_on_disconnect: bool = False
    turn_log_retention: float = 600.0
    pg_pool_min: int = 1
    pg_pool_max: int = 10
    pg_statement_timeout: float = 30.0
    pg_acquire_timeout: float = 10.0
    max_streams_per_owner: int = 64
    max_turns_per_owner: int = 32
    max_large_bodies_per_owner: int = 2
    max_chats_per_owner: int = DEFAULT_MAX_CHATS
    max_stored_bytes_per_owner: int | None = None
    shutdown_grace: float = DEFAULT_SHUTDOWN_GRACE


def _tokens(options: ServeOptions, out: TextIO) -> dict[str, str]:
    path = options.tokens
    if path is None:
        path = Path(DEFAULT_TOKENS_FILE)
        if not path.exists():
            create_tokens_file(path)
            print(f"created {path.resolve()} with a token for the owner 'local'", file=out)
    tokens = load_tokens(path)
    _warn_if_shared(path)
    return tokens


def _warn_if_shared(path: Path) -> None:
    """A tokens file other users of the machine may read or write hands them every
    owner's chats: said once at start (the file still serves, as ssh's keys would not;
    a deployment may keep it in a directory only the server's user can enter)."""
    try:
        mode = path.stat().st_mode
    except OSError:  # gone since it was read: nothing to say of it
        return
    if mode & 0o077:
        logger.warning("the tokens file %s is readable or writable by other users (mode "
                       "%03o); chmod 600 it", path, mode & 0o777)


@contextlib.asynccontextmanager
async def _adapters(options: ServeOptions) -> AsyncIterator[
        tuple[dict[str, ProviderAdapter], EmulatedProviders | None]]:
    if options.live:
        adapters = live_adapters(os.environ)
        if not adapters:
            msg = (f"--live needs at least one of {', '.join(LIVE_KEYS.values())} or "
                   "OPENAI_COMPATIBLE_BASE_URL in the environment")
            raise ConfigurationError(msg)
        yield adapters, None
        return
    async with EmulatedProviders() as stack:
        yield stack.adapters, stack


def _url(runner: web.AppRunner, host: str, tokens: dict[str, str], *, local: bool) -> str:
    """The page's URL; with the local tokens file's single token in its fragment (never
    a token from a file the operator named with ``--tokens``: stdout may be logged)."""
    port = next(iter(runner.addresses))[1]
    shown = f"[{host}]" if ":" in host else host
    fragment = f"#token={next(iter(tokens))}" if local and len(tokens) == 1 else ""
    return f"http://{shown}:{port}/{fragment}"


async def serve(options: ServeOptions, *, out: TextIO = sys.stdout, err: TextIO = sys.stderr,
                stop: asyncio.Event | None = None) -> int:
    """Serve until ``stop`` is set (SIGINT/SIGTERM set it); returns the exit status.
    The log goes to ``err`` (``--log-level``, ``--log-format``)."""
    stop = stop or asyncio.Event()
    with server_logging(options.log_level, options.log_format, err):
        return await _serve(options, out, stop)


async def _serve(options: ServeOptions, out: TextIO, stop: asyncio.Event) -> int:
    tokens = _tokens(options, out)
    budget = ShutdownBudget(options.shutdown_grace)
    config = ServerConfig(max_body_bytes=options.max_body_bytes,
                          max_text_chars=options.max_text_chars,
                          cors_origin=options.cors_origin, emulated=not options.live,
                          cancel_on_disconnect=options.cancel_on_disconnect,
                          allowed_hosts=frozenset([h.lower() for h in options.allowed_hosts]),
                          max_streams_per_owner=options.max_streams_per_owner,
                          max_turns_per_owner=options.max_turns_per_owner,
                          max_large_bodies_per_owner=options.max_large_bodies_per_owner,
                          max_chats_per_owner=options.max_chats_per_owner,
                          shutdown_seconds=budget.turns)
    private_sqlite_file(options.db)
    loop = asyncio.get_running_loop()
    AcceptFailures().install(loop)
    resources = contextlib.AsyncExitStack()  # closed within the grace's end, or cut
    deadline: float | None = None
    try:
        adapters, stack = await resources.enter_async_context(_adapters(options))
        store = await resources.enter_async_context(open_store(
            options.db, pg_pool=(options.pg_pool_min, options.pg_pool_max),
            pg_timeouts=(options.pg_statement_timeout, options.pg_acquire_timeout)))
        if options.max_stored_bytes_per_owner is not None and isinstance(store, QuotaStore):
            await store.set_storage_quota(options.max_stored_bytes_per_owner)
        transport = await resources.enter_async_context(AiohttpTransport())
        reclaimed = await store.reclaim_expired()
        tracer_provider = console_tracing() if options.otel_console else None
        engine = TurnEngine(store, adapters, transport, registry=SERVER_REGISTRY,
                            tracer_provider=tracer_provider, lease_seconds=options.lease_seconds,
                            limits=TurnLimits(turn_seconds=options.turn_seconds))
        services = make_services(engine, tokens, config=config, emulators=stack)
        engine.detached.configure(retention_seconds=options.turn_log_retention)
        sweeper = asyncio.create_task(engine.detached.maintain(), name="detached-turn maintenance")
        runner = TurnstateRunner(create_app(services), handler_cancellation=True,
                                 access_log=None, shutdown_timeout=budget.connections,
                                 **config.runner_options())
        await runner.setup()
        try:
            await web.TCPSite(runner, options.host, options.port).start()
            _install_signals(stop.set)
            mode = "emulated" if stack is not None else "live"
            print(f"turnstate serve: {mode} providers: {', '.join(sorted(adapters))}; "
                  f"database {redact_dsn(options.db)}; {reclaimed} stale lease(s) reclaimed",
                  file=out)
            url = _url(runner, options.host, tokens, local=options.tokens is None)
            print(f"open {url}", file=out, flush=True)
            await stop.wait()
        finally:
            deadline = loop.time() + budget.grace
            sweeper.cancel()
            await finish_by(runner.cleanup(), deadline - budget.close, "the server's shutdown")
            if tracer_provider is not None:
                tracer_provider.shutdown()  # flushes the last spans
        print(f"turnstate serve: stopped ({services.cancelled_at_shutdown} in-flight "
              "turn(s) cancelled)", file=out, flush=True)
    finally:
        if deadline is None:  # startup failed: close what was opened, as it comes
            await resources.aclose()
        else:
            await finish_by(resources.aclose(), deadline,
                            "closing the store, the transport and the emulators")
    return 0


def _install_signals(handler: Callable[[], None]) -> None:
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, handler)


YOUNG_THRESHOLD = 20_000
"""Allocations between two young collections in a ``turnstate serve`` process (Python's
default is 700): a turn allocates a few thousand short-lived objects, nearly all freed
by reference counting, and with many turns running each young collection also walked
every running turn's live objects (issue 26: 1.1-1.3 ms of collector time per turn at
100 concurrent clients, 0.1-0.2 ms with this)."""


def tune_collector() -> None:
    """What a process that only serves turns asks of the garbage collector: everything
    imported and built so far moved out of its reach (``gc.freeze``: never collected,
    never walked again), and young collections ``YOUNG_THRESHOLD`` allocations apart
    (the older generations twice as far apart as the defaults). ``run_server`` calls
    it; an application that embeds ``serve`` decides for its own process."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(YOUNG_THRESHOLD, 20, 20)


def run_server(options: ServeOptions) -> int:
    tune_collector()
    raise_open_files_limit()
    return asyncio.run(serve(options))
