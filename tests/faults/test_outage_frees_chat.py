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

from tests import pg_support
from tests.faults.outage_server import outage_server, seconds_until_free
from tests.server.support import turn_body
from turnstate.emulators._faults import Fault
from turnstate.storage import TurnStatus

SCHEMA = f"{pg_support.SCHEMA}_outage_free"
LEASE, OUTAGE, BACK_WITHIN = 30.0, 3.0, 8.0

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")


@pytest.mark.parametrize("answer", ["completes", "fails"])
async def test_a_short_outage_mid_turn_frees_the_chat_soon_after_it_ends(
        pg_schema: str, monkeypatch: pytest.MonkeyPatch, answer: str) -> None:
    async with outage_server(SCHEMA, LEASE, monkeypatch) as server:
        api, proxy, store = server.api, server.proxy, server.store
        chat_id = await api.new_chat()
        gate = asyncio.Event()  # the provider answers once the database is gone
        server.stack.emulators["openai"].faults.push(
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
        freed = await seconds_until_free(api, chat_id, BACK_WITHIN)
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
