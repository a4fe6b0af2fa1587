"""A reader on another node waits for a busy node's last log writes (helper "resume3").

The node running a turn writes the events it sent after the commit at its writer's next
tick; a node busy serving its own streams gets there late (two ``serve`` processes on
one SQLite file, a 2,005-event turn followed by 500 streams on each: its writer was
seconds behind). A reader elsewhere gave an ended turn 2 s for its final event, then
rebuilt it from the store: 55 to 253 of the 500 followers on the other node got the
first event and the rebuilt end, none of the 2,000 deltas between.
"""

from __future__ import annotations

import asyncio

import pytest

from tests.engine.support import Env, make_turn
from tests.engine.test_detached import gate_log
from turnstate.engine._detached import LOG_RETRY_SECONDS
from turnstate.engine._follow import FINAL_GRACE_SECONDS, REBUILT_FINAL_ID, follow_log
from turnstate.storage._turn_log import LoggedEvent

NOT_BEFORE_SECONDS = 2.5  # a reader rebuilt the end 2 s after the turn's


@pytest.mark.parametrize("env", ["sqlite"], indirect=True)
async def test_a_reader_elsewhere_waits_for_a_late_node_s_log_instead_of_rebuilding_the_end(
        env: Env) -> None:
    log, gate = gate_log(env)  # the running node's writer is held up
    live = await env.engine.start_turn(env.chat_id, make_turn("a busy node"))
    assert live.task is not None
    await asyncio.wait_for(asyncio.shield(live.task), 2)
    assert (await env.store.load_turn(live.turn_id)).status.value == "completed"
    following = await follow_log(env.store, log, env.chat_id, live.turn_id, after=0,
                                 owner=None, encode=env.engine.detached.encode,
                                 poll_seconds=0.05)
    reading = asyncio.ensure_future(_all(following.batches))
    done, _ = await asyncio.wait((reading,), timeout=NOT_BEFORE_SECONDS)
    assert not done, "the end was rebuilt while its node was still to write it"
    gate.set()
    got = await asyncio.wait_for(reading, 5)
    assert [e.id for e in got] == list(range(1, live.last_id + 1))
    assert REBUILT_FINAL_ID not in [e.id for e in got]


def test_the_grace_outlasts_the_writer_s_retries() -> None:
    assert FINAL_GRACE_SECONDS > LOG_RETRY_SECONDS


async def _all(batches: object) -> list[LoggedEvent]:
    return [event async for batch in batches for event in batch]  # type: ignore[attr-defined]
