"""A resume on another node just after the turn ended, while its log lags (helper
"resume3").

The node running a turn commits it, then writes the turn's last events to the log at its
writer's next tick (50 ms; longer while the store is slow). A client that read up to
event N from that node and reconnects to another node in between finds the turn's
record ended and the log short of N: it was refused at once as "beyond this turn's last
event" (the server's 400) and never got the end it was owed. Found driving two
``serve`` processes on one SQLite file: 2 of 6 clients hopping between the nodes at
random points of a 40-event turn were refused so.
"""

from __future__ import annotations

import asyncio

from tests.engine.support import Env, make_turn
from tests.engine.test_detached import gate_log
from turnstate.engine._follow import follow_log


async def test_a_resume_past_a_lagging_log_of_an_ended_turn_waits_for_the_log(
        env: Env) -> None:
    log, gate = gate_log(env)  # the running node's log writes wait for the gate
    live = await env.engine.start_turn(env.chat_id, make_turn("ends before its log"))
    assert live.task is not None
    await asyncio.wait_for(asyncio.shield(live.task), 2)
    record = await env.store.load_turn(live.turn_id)
    assert live.done and record.status.value == "completed"
    seen = live.last_id - 1  # the client saw all but the final event on the running node
    assert (await log.read(env.chat_id, live.turn_id)).last_id < seen
    # another node: the store's log, not this process's memory
    following = asyncio.ensure_future(follow_log(
        env.store, log, env.chat_id, live.turn_id, after=seen, owner=None,
        encode=env.engine.detached.encode, poll_seconds=0.01))
    for _ in range(5):
        await asyncio.sleep(0)
    gate.set()  # the running node's writer catches up
    rest = [event async for event in (await asyncio.wait_for(following, 5)).events]
    assert [(e.id, e.final) for e in rest] == [(live.last_id, True)]
