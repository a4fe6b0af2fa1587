"""The application factory: services, middlewares, routes, the page and shutdown.

``create_app(services)`` builds an aiohttp application around an already running engine
(store, adapters, transport). Run it with ``handler_cancellation=True`` (``serve`` and
the tests do): a client that disconnects mid-turn then cancels its handler, and the
engine ends the turn ``aborted`` with ``cancelled`` and releases its lease.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path

from aiohttp import web

from turnstate.core._conversation import Tool
from turnstate.core._event_json import event_json
from turnstate.core._registry import DEFAULT_REGISTRY, ModelInfo, Registry
from turnstate.emulators._emulated import EmulatedProviders
from turnstate.engine import TurnEngine
from turnstate.server import (
    _emulator_routes,
    _media_routes,
    _resume,
    _routes,
    _turns,
    _ui_routes,
)
from turnstate.server._auth import TokenBook
from turnstate.server._config import ServerConfig
from turnstate.server._http import (
    auth_middleware,
    cors_middleware,
    cors_prepare,
    errors,
    expect_handler,
    host_middleware,
    refuse_unrouted_expect,
    static_expect,
)
from turnstate.server._metrics import Metrics
from turnstate.server._owner_limits import large_answers
from turnstate.server._owner_scope import OwnerTagging
from turnstate.server._services import SERVICES, Services
from turnstate.server._shutdown import STREAMS_GRACE_SECONDS, end_turns
from turnstate.server._sse import TurnStream
from turnstate.server._static import CompressedStatic, compressed
from turnstate.server._tools import DEMO_TOOLS

SMALL_CONTEXT_MODEL = ModelInfo(provider="openai-compatible", name="demo-small-context",
                                context_limit=2048)
"""A tiny context window, so the page's context meter can be watched filling up."""

SERVER_REGISTRY: Registry = DEFAULT_REGISTRY.with_model(SMALL_CONTEXT_MODEL)

STATIC = Path(str(resources.files("turnstate.server") / "static"))
_PAGE_HEADERS = {
    "Cache-Control": "no-cache",
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data: blob:; "
                               "object-src 'none'; base-uri 'none'; form-action 'self'; "
                               "frame-ancestors 'none'",
    "X-Frame-Options": "DENY",  # frame-ancestors for browsers that predate it
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}
"""The page's and its files' headers. ``default-src`` does not cover ``base-uri`` and
``form-action``: without them an injected ``<base>`` would move every relative module
import elsewhere, an injected form could post anywhere."""


def _utcnow() -> datetime:
    return datetime.now(UTC)


def make_services(engine: TurnEngine, tokens: Mapping[str, str], *,
                  config: ServerConfig | None = None,
                  emulators: EmulatedProviders | None = None,
                  tools: Mapping[str, Tool] = DEMO_TOOLS,
                  clock: Callable[[], datetime] = _utcnow) -> Services:
    """Everything the routes need, around an engine built by the caller."""
    if emulators is not None:  # an owner's emulator faults meet that owner's turns only
        engine.transport = OwnerTagging(engine.transport)
    services = Services(engine=engine, tokens=TokenBook(tokens),
                        config=config or ServerConfig(emulated=emulators is not None),
                        metrics=Metrics(), tools=dict(tools), emulators=emulators,
                        clock=clock)
    engine.detached.configure(encode=event_json, on_finished=services.turn_finished)
    return services


def create_app(services: Services) -> web.Application:
    config = services.config
    middlewares = [errors, auth_middleware(services.tokens),
                   large_answers(services.limits, writes=_VIEW_WRITES)]
    if config.allowed_hosts:
        middlewares.insert(1, host_middleware(config.allowed_hosts))
    if config.cors_origin:
        middlewares.insert(0, cors_middleware(config.cors_origin))
    app = web.Application(middlewares=middlewares,
                          client_max_size=max(config.max_body_bytes,
                                              config.max_content_bytes))
    if config.cors_origin:
        app.on_response_prepare.append(cors_prepare(config.cors_origin))
    app[SERVICES] = services
    # The open streams, read when scraped: no locked increment and decrement per stream.
    services.metrics.streams.set_function(lambda: len(services.turn_tasks))
    # The turn route first: aiohttp tries the routes under "/api/chats" in the order
    # added, a regular expression each (the turn's is found at the first, not the fourth).
    tables = [_turns.ROUTES, _routes.ROUTES, _resume.ROUTES, _ui_routes.ROUTES,
              _media_routes.ROUTES]
    if services.emulators is not None:
        tables.append(_emulator_routes.ROUTES)
    expect = expect_handler(services.tokens, _body_limit(config))
    for table in tables:  # each route answers Expect: 100-continue as its request
        app.add_routes(web.RouteDef(route.method, route.path, route.handler,
                                    {**route.kwargs, "expect_handler": expect})
                       if isinstance(route, web.RouteDef) else route for route in table)
    refuse_unrouted_expect(app.router, services.tokens)  # a 404 or 405 too
    app.router.add_get("/", _page)
    app.router.add_get("/favicon.ico", _favicon)
    app.router.register_resource(CompressedStatic(  # add_static's, gzipped
        "/static", STATIC, expect_handler=static_expect(STATIC)))
    app.on_response_prepare.append(_page_headers)
    app.on_shutdown.append(_cancel_turns)
    return app


_VIEW_WRITES = frozenset({_routes.edit_message, _routes.delete_messages})
"""The routes that change a chat and answer its view, which may be a large answer: they
take their stream before they write (``large_answers``)."""

_TURN_BODIES = frozenset({_turns.post_turn, _ui_routes.post_ui_message})
"""The routes whose body is a turn's, up to ``max_content_bytes``."""


def _body_limit(config: ServerConfig) -> Callable[[web.Request], int]:
    """The body limit of the request's route, as its handler's ``read_json`` takes it."""
    def limit_of(request: web.Request) -> int:
        return config.max_content_bytes if request.match_info.handler in _TURN_BODIES \
            else config.max_body_bytes
    return limit_of


async def _page(request: web.Request) -> web.StreamResponse:
    return compressed(request, web.FileResponse(STATIC / "index.html"))


_API_HEADERS = {"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff"}


async def _favicon(request: web.Request) -> web.StreamResponse:
    return web.FileResponse(STATIC / "favicon.svg", headers={"Content-Type": "image/svg+xml"})


async def _page_headers(request: web.Request, response: web.StreamResponse) -> None:
    """The page's security headers; ``/api`` answers are never cached or sniffed; the
    ``Server`` header names no versions. A turn's stream carries them already (with its
    own ``no-cache``, which ``setdefault`` kept before): skipped, a turn's three header
    writes fewer (issue 26)."""
    if type(response) is TurnStream:
        return
    headers = _API_HEADERS if request.path.startswith("/api/") else _PAGE_HEADERS
    for name, value in headers.items():
        response.headers.setdefault(name, value)
    response.headers["Server"] = "turnstate"


async def _cancel_turns(app: web.Application) -> None:
    """Shutdown: end every turn running here ``cancelled`` (each records its abort and
    sends its streams the final ``turn_aborted``: the connections are still open here),
    let those streams finish, then cut the streams that follow other nodes' turns; all
    within ``ServerConfig.shutdown_seconds`` (a turn whose writes the store did not take
    by then is logged and given up: ``_shutdown.end_turns``)."""
    services = app[SERVICES]
    services.stopping = True
    loop = asyncio.get_running_loop()
    deadline = loop.time() + services.config.shutdown_seconds
    services.cancelled_at_shutdown += await end_turns(services.engine.detached,
                                                      services.config.shutdown_seconds)
    tasks = list(services.turn_tasks)
    if tasks:
        await asyncio.wait(tasks, timeout=max(0.0, min(STREAMS_GRACE_SECONDS,
                                                       deadline - loop.time())))
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


__all__ = ["SERVER_REGISTRY", "STATIC", "create_app", "make_services"]
