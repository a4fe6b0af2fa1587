"""A follower on a node whose clock is minutes ahead of PostgreSQL's (helper "lifecycle7").

A reader gives an ended turn's log ``FINAL_GRACE_SECONDS`` for its final event unless the
turn ended ``ENDED_LONG_AGO_SECONDS`` ago, which it judged by its own clock against the
``ended_at`` the database wrote: on a node ten minutes ahead every turn "ended long
ago", so a follower there rebuilt the end of a turn another node had just ended, before
that node's writer logged its last events (its followers lost them). The log's page now
carries the database's time of the read (``TurnLogPage.read_at``) and the reader judges
by it.
"""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta

import pytest

from tests import pg_support
from tests.storage.support import abort, start
from turnstate.emulators._scripted import ScriptedBackend
from turnstate.engine import TurnEngine
from turnstate.engine._follow import _Reader
from turnstate.storage import PostgresStore
from turnstate.storage._turn_log import LoggedEvent, turn_log_of

AHEAD = timedelta(minutes=10)


def _ahead() -> datetime:
    return datetime.now(UTC) + AHEAD


@pytest.mark.usefixtures("pg_schema")
async def test_a_node_ahead_of_the_database_still_waits_for_a_just_ended_turns_end() -> None:
    async with PostgresStore.open(pg_support.DSN, schema=pg_support.SCHEMA,
                                  pool_max=2) as store:
        chat = await store.create_chat(owner="alice")
        lease = await store.begin_turn(chat.id, start("t-ahead"))
        log = turn_log_of(store)
        await log.append("t-ahead", [LoggedEvent(1, "text_delta", json.dumps({"t": "a"}))])
        await store.abort_turn(lease, abort("cancelled"))  # its node's final event: later
        page = await log.read(chat.id, "t-ahead", after=1)  # nothing new: as a waiting reader
        reader = _Reader(store, log, chat.id, "t-ahead", None, str, 0.05, _ahead)
        assert not reader._ended_long_ago(page)  # by the database's time: just ended

        backend = ScriptedBackend()
        node = TurnEngine(store, backend.adapters(), backend, clock=_ahead)
        node.detached.stop_poll_seconds = 0.05
        following = await node.follow(chat.id, "t-ahead", after=1)

        async def rest() -> list[LoggedEvent]:
            return [event async for event in following.events]

        task = asyncio.ensure_future(rest())
        done, _ = await asyncio.wait((task,), timeout=0.3)
        assert not done, task.result()  # it rebuilt the end at once before
        final = json.dumps({"type": "turn_aborted", "reason": "cancelled"})
        await log.append("t-ahead", [LoggedEvent(2, "turn_aborted", final)])
        got = await asyncio.wait_for(task, 3)
        assert [(e.id, e.type) for e in got] == [(2, "turn_aborted")]  # the node's own
        await node.aclose()
