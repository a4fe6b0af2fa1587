"""A reference server on PostgreSQL through the tests' proxy (``tcp_proxy``), for the
outage tests: the proxy refuses and cuts the database's connections while the server
runs turns against the emulators; and the wait for the chat to take a new turn."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import attrs
import pytest
from aiohttp.test_utils import TestClient, TestServer

from tests import pg_support
from tests.server.support import Api, turn_body
from tests.tcp_proxy import TcpProxy, proxied, proxied_dsn, upstream_of
from turnstate.emulators._emulated import EmulatedProviders
from turnstate.engine import TurnEngine
from turnstate.providers import AiohttpTransport, RetryPolicy
from turnstate.server import SERVER_REGISTRY, ServerConfig, create_app, make_services
from turnstate.storage import PostgresStore
from turnstate.storage import _postgres_log as pg_log


@attrs.frozen
class OutageServer:
    api: Api
    proxy: TcpProxy
    stack: EmulatedProviders
    store: PostgresStore


@asynccontextmanager
async def outage_server(schema: str, lease: float,
                        monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[OutageServer]:
    """One server, its store on ``schema`` through a proxy, a lease of ``lease`` s, one
    provider attempt a call, short database timeouts (an outage is seen within 1.5 s)."""
    monkeypatch.setattr(pg_log, "LISTEN_SECONDS", 0.5)
    config = ServerConfig()
    async with proxied(*upstream_of(pg_support.DSN)) as proxy, EmulatedProviders() as stack, \
            AiohttpTransport(retry=RetryPolicy(max_attempts=1)) as transport, \
            PostgresStore.open(proxied_dsn(pg_support.DSN, proxy), schema=schema,
                               statement_timeout=1.0, command_timeout=1.5,
                               acquire_timeout=1.5, pool_min=2, pool_max=4) as store:
        engine = TurnEngine(store, stack.adapters, transport, registry=SERVER_REGISTRY,
                            lease_seconds=lease)
        services = make_services(engine, {"alice-token": "alice"}, config=config,
                                 emulators=stack)
        server = TestServer(create_app(services))
        await server.start_server(**config.runner_options())
        async with TestClient(server) as client:
            yield OutageServer(api=Api(client=client, services=services, stack=stack),
                               proxy=proxy, stack=stack, store=store)


async def seconds_until_free(api: Api, chat_id: str, within: float) -> float | None:
    """How long after now the chat took a new turn (asked every 0.2 s; a 409 or 503
    meanwhile), or None when it did not within ``within`` seconds."""
    start = time.monotonic()
    while time.monotonic() - start < within:
        again = await api.call("POST", f"/api/chats/{chat_id}/turns", json=turn_body("again"))
        await again.read()
        if again.status == 200:
            return time.monotonic() - start
        assert again.status in {409, 503}, again.status
        await asyncio.sleep(0.2)
    return None
