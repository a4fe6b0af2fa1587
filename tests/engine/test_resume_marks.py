"""A log reader lets go of its change mark once its turn has ended (helper "resume3").

A reader takes the turn's change mark before each read of the log; the read that finds
the final event ends it, and its mark stayed in the store's signals until the turn's next
change, which an ended turn never has: one future per turn followed through the log, for
the life of the process (20 followed turns, 20 marks).
"""

from __future__ import annotations

from tests.engine.support import Env, make_turn
from turnstate.engine import TurnEngine
from turnstate.storage._turn_log import turn_log_of


async def test_following_ended_turns_through_the_log_leaves_no_mark_behind(env: Env) -> None:
    other_node = TurnEngine(env.store, env.backend.adapters(), env.backend, clock=env.clock)
    for i in range(20):
        live = await env.engine.start_turn(env.chat_id, make_turn(f"turn {i}"))
        following = await other_node.follow(env.chat_id, live.turn_id, after=0)
        events = [event async for event in following.events]
        assert events[-1].final
        await env.engine.detached.settled()
    assert turn_log_of(env.store).signals._pending == {}
