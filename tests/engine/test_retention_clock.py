"""The turn-log retention sweep measures age on the store's clock, not the node's.

``DetachedTurns.expire`` used to delete the logs of turns that ended before the node's
clock minus the retention, comparing it with ``ended_at``, which the store wrote with
its own clock (PostgreSQL's, in production): a node whose clock ran ahead by more than
the retention expired the logs of turns that had just ended, and their streams could no
longer resume. The sweep now gives the log an age (``expire(older_than=...)``), and the
store subtracts it from the clock that wrote the ends (PostgreSQL: in the statement).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import datetime, timedelta
from typing import Any

import pytest

from tests import pg_support
from turnstate.core._conversation import TextPart
from turnstate.engine._detached import DetachedTurns
from turnstate.storage import MemoryStore, PostgresStore, Store, TurnAbort, TurnStart
from turnstate.storage._turn_log import LoggedEvent, turn_log_of
from turnstate.testing._records import T0, ManualClock

AHEAD = timedelta(hours=2)  # the node's clock, ahead of the store's by more than retention


class _Node:
    """What ``DetachedTurns`` needs of an engine, with this node's clock."""

    def __init__(self, store: Store, clock: Any) -> None:
        self.store, self.clock, self.endings, self.lease_seconds = store, clock, {}, 30.0

    def run_turn(self, chat_id: str, turn: Any) -> AsyncIterator[Any]:
        raise AssertionError("no turn runs here")


_CLOCK = ManualClock(T0)  # the memory store's


@pytest.fixture(params=["memory", "postgres"])
async def store(request: pytest.FixtureRequest) -> AsyncIterator[Store]:
    if request.param == "memory":
        yield MemoryStore(clock=_CLOCK)
        return
    schema = request.getfixturevalue("pg_schema")
    async with PostgresStore.open(pg_support.DSN, schema=schema) as opened:  # its clock
        await opened.fetch_raw("TRUNCATE chats, messages, turns CASCADE")
        yield opened


async def _store_now(store: Store) -> datetime:
    if isinstance(store, PostgresStore):
        ((now,),) = await store.fetch_raw("SELECT clock_timestamp()")
        return now  # type: ignore[no-any-return]
    return _CLOCK()


async def test_a_node_clock_ahead_of_the_store_s_expires_no_fresh_log(store: Store) -> None:
    await store.create_chat(owner="alice", chat_id="c1")
    lease = await store.begin_turn("c1", TurnStart(
        turn_id="t1", user_parts=(TextPart(text="hello"),), provider="openai",
        model="gpt-4o", lease_seconds=30))
    log = turn_log_of(store)
    await log.append("t1", [LoggedEvent(1, "text_delta", json.dumps({"text": "hi"}))])
    await store.abort_turn(lease, TurnAbort(reason="cancelled"))
    ahead = await _store_now(store) + AHEAD
    detached = DetachedTurns(_Node(store, lambda: ahead),  # type: ignore[arg-type]
                             retention_seconds=600.0)
    assert await detached.expire() == 0  # the turn ended a moment ago, by the store
    page = await log.read("c1", "t1")
    assert not page.expired and [e.id for e in page.events] == [1]
    detached.configure(retention_seconds=0.0)
    _CLOCK.advance(1)  # the memory store's time goes on (PostgreSQL's goes on itself)
    assert await detached.expire() == 1  # an age the store's clock has passed
    assert (await log.read("c1", "t1")).expired
