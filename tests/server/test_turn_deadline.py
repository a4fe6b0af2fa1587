"""A turn past its deadline on the reference server (deadline10): its stream ends with
``turn_aborted`` reason ``deadline_exceeded``, the answer keeps what streamed, the chat
is free and the owner's turn slot given back. Before, a stalled provider stream held the
turn, its lease and its client until the transport's own limits (10 minutes a try)."""

from __future__ import annotations

import asyncio

from tests.server.support import Api, parse_sse
from tests.server.test_resume import start
from turnstate.emulators._base import Fault
from turnstate.engine import TurnLimits

WAIT = 20.0  # a turn its deadline does not end fails the test instead of hanging it


async def test_a_stalled_turn_ends_at_its_deadline_for_its_client(api: Api) -> None:
    api.services.engine.limits = TurnLimits(turn_seconds=0.3)  # read per turn
    chat_id = await api.new_chat()
    response, turn_id = await start(api, chat_id, Fault(stall_after=6), text="long answer")
    events, _ = parse_sse(await asyncio.wait_for(response.text(), WAIT))
    final = events[-1]
    assert final.event == "turn_aborted" and final.data["reason"] == "deadline_exceeded"
    assert "deadline" in final.data["detail"]
    record = await api.services.store.load_turn(turn_id)
    assert (record.status.value, record.reason) == ("aborted", "deadline_exceeded")
    assert (await api.services.store.load_chat(chat_id)).active_turn_id is None
    await asyncio.wait_for(api.services.engine.detached.settled(), WAIT)
    assert api.services.turn_tasks == set()
    streamed = "".join(e.data["text"] for e in events if e.event == "text_delta")
    messages = (await api.json("GET", f"/api/chats/{chat_id}"))["messages"]
    assert messages[-1]["status"] == "aborted"
    assert messages[-1]["parts"] == ([{"type": "text", "text": streamed}] if streamed else [])
    api.services.engine.limits = TurnLimits()
    assert (await api.turn(chat_id, text="next"))[-1].event == "turn_completed"
