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

from tests import pg_support
from tests.faults.outage_server import outage_server, seconds_until_free
from tests.server.support import turn_body
from turnstate.emulators._faults import Fault
from turnstate.storage import TurnStatus

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
    async with outage_server(SCHEMA, LEASE, monkeypatch) as server:
        api, proxy, store = server.api, server.proxy, server.store
        chat_id = await api.new_chat()
        gate = _Held()  # never opened: the provider holds the turn
        server.stack.emulators["openai"].faults.push(Fault(gate=gate))
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
        freed = await seconds_until_free(api, chat_id, BACK_WITHIN)
        record = await store.load_turn(turn_id)
        stops = await store.turn_log.stop_requests([turn_id])
    assert stop.status == 202, stopped  # 503 before: the request is written first
    assert stopped == {"turnId": turn_id, "status": "stopping"}
    assert answered_in_outage
    assert "event: turn_aborted" in body and '"reason":"stopped"' in body, body
    assert freed is not None, f"the chat was still held {BACK_WITHIN} s after"
    assert record.status is TurnStatus.ABORTED and record.reason == "stopped", record
    assert stops == frozenset({turn_id})  # written once the database returned
