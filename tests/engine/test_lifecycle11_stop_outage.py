"""A stop asked while the store is away reaches a detached turn running on the same node
at once (lifecycle11, after ops10: it was refused, the server's ``503``, because the stop
is recorded in the store first). The stop request is written once the store returns; a
turn of another node, or of another owner, still needs the store.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from tests.engine.support import forever, make_turn, tool
from tests.engine.test_lifecycle11_outage import Outage
from tests.engine.virtual_time import run_virtual, virtual_store
from turnstate.core._errors import StorageUnavailable
from turnstate.emulators._scripted import ScriptedBackend, ScriptStep
from turnstate.engine import TurnEngine
from turnstate.storage import TurnRecord, TurnStatus

LEASE, OUTAGE = 30.0, 3.0


async def _stopped_in_outage(owner: str | None) -> tuple[str, str | None, float, TurnStatus,
                                                          frozenset[str], TurnRecord]:
    """A detached turn inside a tool; the store goes away for 3 s; a stop is asked: the
    final event's type and reason, how long the turn took to end after the stop, its
    stored status, the stop requests logged, and the record the stop returned."""
    store = virtual_store()
    chat = await store.create_chat(owner="alice")
    outage = Outage(store)
    backend = ScriptedBackend()
    backend.push("openai", ScriptStep.call(("wait", {"city": "x"})), ScriptStep.reply("no"))
    engine = TurnEngine(outage, backend.adapters(), backend,  # type: ignore[arg-type]
                        lease_seconds=LEASE)
    turn = make_turn("q", tools=(tool("wait", forever, timeout=600),), owner="alice")
    live = await engine.start_turn(chat.id, turn)
    following = await engine.follow(chat.id, live.turn_id)
    events = aiter(following.events)
    while (await anext(events)).type != "tool_call":
        pass
    loop = asyncio.get_running_loop()
    outage.begin()
    asked = loop.time()
    try:
        record = await engine.stop(live.turn_id, owner=owner, chat_id=chat.id)
    except StorageUnavailable:  # refused: the turn is ended once the store is back
        await asyncio.sleep(OUTAGE)
        await engine.aclose()
        raise
    assert record.status is TurnStatus.IN_PROGRESS and record.id == live.turn_id
    assert loop.time() == asked  # at once, the store still away
    final = None
    async for event in events:
        final = event
    assert final is not None
    await engine.detached.settled()
    await asyncio.sleep(0.1)
    stops = await store.turn_log.stop_requests([live.turn_id])
    status = (await store.load_turn(live.turn_id)).status
    await engine.aclose()
    return (final.type, json.loads(final.data).get("reason"), loop.time() - asked, status,
            stops, record)


def test_a_stop_in_an_outage_stops_a_turn_running_here() -> None:
    kind, reason, took, status, stops, _ = run_virtual(_stopped_in_outage("alice"))
    assert (kind, reason) == ("turn_aborted", "stopped")
    assert status is TurnStatus.ABORTED and took < LEASE
    assert len(stops) == 1  # the stop request was written once the store returned


def test_a_stop_in_an_outage_returns_the_turns_model() -> None:
    """The record this node returns names the turn's provider and model, as the store's
    would (life12: its model was empty)."""
    *_, record = run_virtual(_stopped_in_outage("alice"))
    assert (record.provider, record.model) == ("openai", "gpt-4o")
    assert record.chat_id and record.assistant_seq == record.user_seq + 1


def test_a_stop_in_an_outage_of_another_owner_is_still_refused() -> None:
    with pytest.raises(StorageUnavailable):
        run_virtual(_stopped_in_outage("mallory"))
