"""Server fixtures: the app on a loopback TestServer with the five emulators behind it."""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from aiohttp.test_utils import TestClient, TestServer

from tests.server.support import Api
from turnstate.emulators._emulated import EmulatedProviders
from turnstate.engine import TurnEngine
from turnstate.providers._transport import AiohttpTransport, RetryPolicy
from turnstate.server import SERVER_REGISTRY, ServerConfig, create_app, make_services
from turnstate.server._runner import TurnstateRunner
from turnstate.storage import SqliteStore

TOKENS = {"alice-token": "alice", "bob-token": "bob"}


class TurnstateTestServer(TestServer):
    """``TestServer`` on the runner ``serve`` uses (JSON answers to the parser's refusals)."""

    async def _make_runner(self, **kwargs: Any) -> TurnstateRunner:
        return TurnstateRunner(self.app, **kwargs)


@pytest.fixture
def config() -> ServerConfig:
    return ServerConfig(max_body_bytes=64 * 1024, max_content_bytes=256 * 1024,
                        max_text_chars=2_000)


@pytest.fixture
async def api(config: ServerConfig) -> AsyncIterator[Api]:
    async with EmulatedProviders() as stack, \
            AiohttpTransport(retry=RetryPolicy(max_attempts=1)) as transport, \
            SqliteStore.open(":memory:") as store:
        engine = TurnEngine(store, stack.adapters, transport, registry=SERVER_REGISTRY)
        services = make_services(engine, TOKENS, config=config, emulators=stack)
        server = TurnstateTestServer(create_app(services))
        await server.start_server(**config.runner_options())  # TestServer() drops kwargs
        async with TestClient(server) as client:
            yield Api(client=client, services=services, stack=stack)


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def chromium() -> AsyncIterator[Any]:
    """The run's one headless chromium; tests take ``test_browser.browser`` (their own
    contexts of it, closed after them)."""
    from playwright.async_api import async_playwright

    from tests.server.test_browser import launch_options

    async with async_playwright() as driver:
        launched = await driver.chromium.launch(**launch_options())
        try:
            yield launched
        finally:
            await launched.close()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The tests that take ``browser`` run on the session's loop, where the run's chromium
    lives (playwright's objects belong to the loop that made them); their async fixtures
    must be declared ``@pytest_asyncio.fixture(loop_scope="session")``."""
    for item in items:
        fixtures = getattr(item, "_fixtureinfo", None)
        if fixtures is None or "browser" not in fixtures.names_closure:
            continue
        for name, defs in fixtures.name2fixturedefs.items():
            func = defs[-1].func
            if (inspect.iscoroutinefunction(func) or inspect.isasyncgenfunction(func)) \
                    and getattr(func, "_loop_scope", None) != "session":
                raise pytest.UsageError(
                    f"{item.nodeid}: its async fixture {name!r} runs on another loop than "
                    "the browser; declare it @pytest_asyncio.fixture(loop_scope=\"session\")")
        item.add_marker(pytest.mark.asyncio(loop_scope="session"), append=False)
