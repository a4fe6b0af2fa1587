"""Server fixtures: the app on a loopback TestServer with the five emulators behind it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
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
