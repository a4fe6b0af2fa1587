"""A stop asked of the server while its database is away reaches a turn running on it
(life12, end to end: ops10's probe answered it ``503``).

One server on PostgreSQL through the tests' proxy, a 30 s lease; a turn waits for its
provider; the database refuses and every connection is cut; the stop is asked then. It
answers ``202`` while the database is still away, the turn is stopped at once; its abort
(and so its stream's final ``turn_aborted``, ``stopped``) is written once the database
returns, as is the stop request; then the chat takes a new turn.
"""

from __future__ import annotations

import asyncio
import time
from typing import Literal

import pytest
from aiohttp.test_utils import TestClient, TestServer

from tests import pg_support
from tests.server.support import Api, turn_body
from tests.tcp_proxy import proxied, proxied_dsn, upstream_of
from turnstate.emulators._emulated import EmulatedProviders
from turnstate.emulators._faults import Fault
from turnstate.engine import TurnEngine
from turnstate.providers._transport import AiohttpTransport, RetryPolicy
from turnstate.server import SERVER_REGISTRY, ServerConfig, create_app, make_services
from turnstate.storage import PostgresStore, TurnStatus
from turnstate.storage import _postgres_log as pg_log

SCHEMA = f"{pg_support.SCHEMA}_life12_stop"
LEASE, OUTAGE, BACK_WITHIN = 30.0, 1.5, 8.0

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")


class _Held(asyncio.Event):
    """A provider's gate that tells when an answer began waiting on it (``waiting``)."""

    def __init__(self) -> None:
        super().__init__()
        self.waiting = asyncio.Event()

    async def wait(self) -> Literal[True]:
        self.waiting.set()
        return await super().wait()


async def test_a_stop_during_an_outage_stops_the_turn_running_here(
        pg_schema: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pg_log, "LISTEN_SECONDS", 0.5)
    config = ServerConfig()
    async with proxied(*upstream_of(pg_support.DSN)) as proxy, EmulatedProviders() as stack, \
            AiohttpTransport(retry=RetryPolicy(max_attempts=1)) as transport, \
            PostgresStore.open(proxied_dsn(pg_support.DSN, proxy), schema=SCHEMA,
                               statement_timeout=1.0, command_timeout=1.5,
                               acquire_timeout=1.5, pool_min=2, pool_max=4) as store:
        engine = TurnEngine(store, stack.adapters, transport, registry=SERVER_REGISTRY,
                            lease_seconds=LEASE)
        services = make_services(engine, {"alice-token": "alice"}, config=config,
                                 emulators=stack)
        server = TestServer(create_app(services))
        await server.start_server(**config.runner_options())
        async with TestClient(server) as client:
            api = Api(client=client, services=services, stack=stack)
            chat_id = await api.new_chat()
            gate = _Held()  # never opened: the provider holds the turn
            stack.emulators["openai"].faults.push(Fault(gate=gate))
            first = await api.call("POST", f"/api/chats/{chat_id}/turns", json=turn_body("q"))
            turn_id = first.headers["X-Turn-Id"]
            await asyncio.wait_for(gate.waiting.wait(), BACK_WITHIN)  # in its provider call
            cut_at = time.monotonic()
            await proxy.refuse()
            proxy.cut()
            stop = await api.call("POST", f"/api/chats/{chat_id}/turns/{turn_id}/stop")
            stopped = await stop.json()
            answered_in_outage = time.monotonic() - cut_at < OUTAGE
            await asyncio.sleep(max(0.0, OUTAGE - (time.monotonic() - cut_at)))
            await proxy.flow()
            # its final event comes once its abort is written: the database back
            body = (await asyncio.wait_for(first.read(), BACK_WITHIN)).decode()
            back_at, freed = time.monotonic(), None
            while time.monotonic() - back_at < BACK_WITHIN:
                again = await api.call("POST", f"/api/chats/{chat_id}/turns",
                                       json=turn_body("again"))
                await again.read()
                if again.status == 200:
                    freed = time.monotonic() - back_at
                    break
                assert again.status in {409, 503}, again.status
                await asyncio.sleep(0.2)
            record = await store.load_turn(turn_id)
            stops = await store.turn_log.stop_requests([turn_id])
    assert stop.status == 202, stopped  # 503 before: the request is written first
    assert stopped == {"turnId": turn_id, "status": "stopping"}
    assert answered_in_outage
    assert "event: turn_aborted" in body and '"reason":"stopped"' in body, body
    assert freed is not None, f"the chat was still held {BACK_WITHIN} s after"
    assert record.status is TurnStatus.ABORTED and record.reason == "stopped", record
    assert stops == frozenset({turn_id})  # written once the database returned
