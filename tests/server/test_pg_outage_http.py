"""The server on PostgreSQL through a loopback proxy (``tests/tcp_proxy.py``) whose
database goes silent: requests are answered 503 ``storage_unavailable`` within the
store's bounds, never left hanging, and the same server serves a turn as soon as the
database answers again."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest
from aiohttp.test_utils import TestClient, TestServer

from tests import pg_support
from tests.server.support import Api, turn_body
from tests.tcp_proxy import TcpProxy, proxied, proxied_dsn, upstream_of
from turnstate.emulators._emulated import EmulatedProviders
from turnstate.engine import TurnEngine
from turnstate.providers._transport import AiohttpTransport, RetryPolicy
from turnstate.server import SERVER_REGISTRY, ServerConfig, create_app, make_services
from turnstate.storage import PostgresStore
from turnstate.storage import _postgres_log as pg_log

DEADLINE = 10.0
BOUND = 1.5  # the store's command and acquire timeouts here
SCHEMA = f"{pg_support.SCHEMA}_outage_http"


@pytest.fixture
async def outage(pg_schema: str, monkeypatch: pytest.MonkeyPatch,
                 ) -> AsyncIterator[tuple[Api, TcpProxy]]:
    monkeypatch.setattr(pg_log, "LISTEN_SECONDS", 0.5)
    config = ServerConfig()
    async with proxied(*upstream_of(pg_support.DSN)) as proxy, EmulatedProviders() as stack, \
            AiohttpTransport(retry=RetryPolicy(max_attempts=1)) as transport, \
            PostgresStore.open(proxied_dsn(pg_support.DSN, proxy), schema=SCHEMA,
                               statement_timeout=1.0, command_timeout=BOUND, acquire_timeout=BOUND,
                               pool_min=2, pool_max=2) as store:
        engine = TurnEngine(store, stack.adapters, transport, registry=SERVER_REGISTRY,
                            lease_seconds=5.0)
        services = make_services(engine, {"alice-token": "alice"}, config=config,
                                 emulators=stack)
        server = TestServer(create_app(services))
        await server.start_server(**config.runner_options())
        async with TestClient(server) as client:
            yield Api(client=client, services=services, stack=stack), proxy


async def test_a_silent_database_is_503_in_bounded_time_and_then_served(
        outage: tuple[Api, TcpProxy]) -> None:
    api, proxy = outage
    chat_id = await api.new_chat()
    assert (await api.turn(chat_id))[-1].event == "turn_completed"
    proxy.black_hole()
    for method, path, body in (("GET", "/api/chats", None),
                               ("POST", f"/api/chats/{chat_id}/turns", turn_body("down"))):
        started = time.monotonic()
        async with asyncio.timeout(DEADLINE):
            response = await api.call(method, path, json=body)
            assert response.status == 503, await response.text()
            assert (await response.json())["error"] == "storage_unavailable"
            assert response.headers["Retry-After"]
        print(f"\n{method} {path.split('/')[-1] or 'chats'} with the database silent: 503 "
              f"after {time.monotonic() - started:.2f} s")
    await proxy.flow()
    async with asyncio.timeout(DEADLINE):
        events = await api.turn(chat_id, text="back")
    assert events[-1].event == "turn_completed", events[-1:]
    history = await api.services.engine.store.load_history(chat_id)
    user_texts = [m.text() for m in history if m.role.value == "user"]
    assert user_texts == ["hello", "back"], user_texts  # the refused turn left nothing


pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")
