"""A database outage of a few seconds mid-turn does not hold the chat for its lease
(ops10's probe of the round's headline bug, kept as a guard).

One server on PostgreSQL through the tests' proxy, a 30 s lease. The provider answers
(or fails) while the database refuses and every connection is cut; 3 s later the
database is back. The turn's end is written once it is (a completed turn, or an abort:
never a half-written answer), and the chat takes a new turn within a few seconds of the
return, not when the 30 s lease runs out. Probed also with the database black-holed
(0.9 s either way) and with a stop asked during the outage (then ``503`` with
``Retry-After``; now ``202`` for a turn running on the node asked:
``test_life12_server_stop_outage``).
"""

from __future__ import annotations

import asyncio
import time

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

SCHEMA = f"{pg_support.SCHEMA}_outage_free"
LEASE, OUTAGE, BACK_WITHIN = 30.0, 3.0, 8.0

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")


@pytest.mark.parametrize("answer", ["completes", "fails"])
async def test_a_short_outage_mid_turn_frees_the_chat_soon_after_it_ends(
        pg_schema: str, monkeypatch: pytest.MonkeyPatch, answer: str) -> None:
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
            gate = asyncio.Event()  # the provider answers once the database is gone
            stack.emulators["openai"].faults.push(
                Fault(gate=gate) if answer == "completes" else Fault(
                    status=400, gate=gate,
                    body={"error": {"message": "no", "type": "invalid_request_error"}}))
            first = await api.call("POST", f"/api/chats/{chat_id}/turns", json=turn_body("q"))
            turn_id = first.headers["X-Turn-Id"]
            await first.content.readuntil(b"\n\n")  # begun: it holds the lease
            cut_at = time.monotonic()
            await proxy.refuse()
            proxy.cut()
            gate.set()
            await asyncio.sleep(OUTAGE - (time.monotonic() - cut_at))
            await proxy.flow()
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
            first.close()
            print(f"\n{answer}: the chat took a new turn {freed} s after the database returned")
            assert freed is not None, f"the chat was still held {BACK_WITHIN} s after"
            record = await store.load_turn(turn_id)
            answer_message = next(m for m in await store.list_messages(chat_id)
                                  if m.id == record.assistant_message_id)
    # Whole or aborted, never half-written: the answer's status is the turn's. The turn
    # rides out the outage (``engine/_patience``: its history read and its commit wait
    # for the database while its lease lasts; before, about half ended ``storage_failed``).
    if answer == "completes":
        assert record.status is TurnStatus.COMPLETED, record
    else:
        assert record.status is TurnStatus.ABORTED
        assert record.reason in {"provider_failed", "storage_failed"}, record
    assert answer_message.status.value == record.status.value
