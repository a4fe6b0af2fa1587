"""A resume at the tail of a running turn (helper "resume3").

A client that reconnects with the last id it saw while the turn has nothing new (the
model thinking, a tool running) must get its response headers at once, not with the
turn's next event or the first heartbeat (10 s): until then it cannot tell a waiting
stream from a server that does not answer, nor learn the status.
"""

from __future__ import annotations

import asyncio

from tests.server.support import Api, parse_sse
from tests.server.test_resume import read_until, start
from turnstate.emulators._base import Fault

HEADERS_WITHIN_SECONDS = 2.0  # the heartbeat is 10 s


async def test_a_resume_at_the_tail_of_a_waiting_turn_gets_its_headers_at_once(
        api: Api) -> None:
    chat_id = await api.new_chat()
    gate = asyncio.Event()
    leaving, turn_id = await start(api, chat_id, Fault(gate=gate), text="wait")
    seen = await read_until(leaving, "state_changed")
    leaving.close()
    path = f"/api/chats/{chat_id}/turns/{turn_id}/events"
    async with asyncio.timeout(HEADERS_WITHIN_SECONDS):
        resumed = await api.call("GET", path, headers={"Last-Event-ID": seen[-1].id})
    assert resumed.status == 200
    assert resumed.headers["Content-Type"] == "text/event-stream"
    assert resumed.headers["X-Turn-Id"] == turn_id
    gate.set()
    rest, _ = parse_sse(await resumed.text())
    assert rest[0].id == str(int(seen[-1].id) + 1)
    assert rest[-1].event == "turn_completed"
