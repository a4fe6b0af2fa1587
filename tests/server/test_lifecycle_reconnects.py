"""A client that drops and reconnects again and again while a turn runs (helper
"lifecycle"): each reconnect resumes from the last id it saw, gets exactly the events
after it, and leaves nothing behind (no follower waiting on the turn, no stream counted
for its owner, no stream task).
"""

from __future__ import annotations

import asyncio

from tests.server.support import Api, parse_sse
from tests.server.test_resume import start
from turnstate.emulators._base import Fault

WAIT = 20.0
DROPS = 40


async def test_a_client_that_keeps_dropping_resumes_each_time_and_leaks_nothing(
        api: Api) -> None:
    chat_id = await api.new_chat()
    response, turn_id = await start(api, chat_id, Fault(delay=0.2), text="word " * 200)
    response.close()  # the first stream drops at once; the turn runs on
    seen: list[int] = []
    last = 0
    async with asyncio.timeout(WAIT):
        for _ in range(DROPS):  # resume, take one block, drop
            resumed = await api.call("GET", f"/api/chats/{chat_id}/turns/{turn_id}/events",
                                     headers={"Last-Event-ID": str(last)})
            assert resumed.status == 200, await resumed.text()
            block = (await resumed.content.readuntil(b"\n\n")).decode()
            resumed.close()
            events, _ = parse_sse(block)
            ids = [int(e.id) for e in events if e.id is not None]
            seen += ids
            last = ids[-1] if ids else last
            if any(e.event in ("turn_completed", "turn_aborted") for e in events):
                break
        else:
            rest = await api.call("GET", f"/api/chats/{chat_id}/turns/{turn_id}/events",
                                  headers={"Last-Event-ID": str(last)})
            events, _ = parse_sse(await rest.text())
            seen += [int(e.id) for e in events if e.id is not None]
        await api.services.engine.detached.settled()
        while api.services.turn_tasks:  # the dropped streams' handlers end
            await asyncio.wait(tuple(api.services.turn_tasks))
    assert seen == list(range(1, len(seen) + 1)), seen  # every id once, in order
    assert api.services.limits.streams == {}
    assert api.services.engine.detached.live == {}
