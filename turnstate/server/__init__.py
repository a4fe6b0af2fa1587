"""The reference chat server: the engine behind an aiohttp JSON + SSE API and a web page.

``create_app(make_services(engine, tokens))`` embeds it in any aiohttp setup (run it on a
``TurnstateRunner`` for JSON answers to requests aiohttp's parser refuses);
``turnstate serve`` (``serve(ServeOptions(...))``) runs it with an SQLite file and the
emulators or live providers. Routes are documented in ``docs/server.md``.
"""

from turnstate.server._app import SERVER_REGISTRY, SMALL_CONTEXT_MODEL, create_app, make_services
from turnstate.server._auth import TokenBook
from turnstate.server._config import ServerConfig, create_tokens_file, load_tokens, parse_tokens
from turnstate.server._metrics import Metrics
from turnstate.server._runner import TurnstateRunner
from turnstate.server._serve import ServeOptions, run_server, serve
from turnstate.server._services import SERVICES, Services
from turnstate.server._tools import DEMO_TOOLS, calculate

__all__ = [
    "DEMO_TOOLS",
    "SERVER_REGISTRY",
    "SERVICES",
    "SMALL_CONTEXT_MODEL",
    "Metrics",
    "ServeOptions",
    "ServerConfig",
    "Services",
    "TokenBook",
    "TurnstateRunner",
    "calculate",
    "create_app",
    "create_tokens_file",
    "load_tokens",
    "make_services",
    "parse_tokens",
    "run_server",
    "serve",
]
