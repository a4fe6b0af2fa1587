"""A ``run_turn`` turn learns at once that another process took its lease (lifecycle6).

lifecycle5's fence signal reached a turn iterated with ``run_turn`` only from its own
process: on PostgreSQL its node listened only once it ran or followed a detached turn,
and SQLite's file watch ran only for turns that append to the log. A release by another
process (``turnstate release``), and on PostgreSQL a reclaim by another node (its sweep,
or a begin on the expired lease), reached the turn at its next renewal, a third of the
lease later, its tool running all the while. Now a starting turn has its store look for
its fence (``watch_held``: PostgreSQL listens, in the background, once; SQLite keeps its
watch while the engines here hold turns), and a PostgreSQL reclaim notifies every node.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests import pg_support
from tests.engine.support import make_turn
from tests.engine.test_lifecycle5_fence_signal import BOUND, LEASE, _opened, _stuck_run_turn
from turnstate.emulators._scripted import ScriptedBackend
from turnstate.engine import TurnEngine
from turnstate.storage import PostgresStore, Store, TurnStatus
from turnstate.storage._release import release_chat


@pytest.fixture(params=["sqlite-file", "postgres"])
def kind(request: pytest.FixtureRequest) -> str:
    if request.param == "postgres":
        request.getfixturevalue("pg_schema")
    return str(request.param)


async def _listening(store: Store) -> None:
    """Until a PostgreSQL store's listening connection, opened in the background as
    the turn began, is up (a notification sent before it would not reach it)."""
    if isinstance(store, PostgresStore):
        for _ in range(400):
            if store.turn_log.listening:
                return
            await asyncio.sleep(0.005)


async def _ended_lease_lost(task: asyncio.Task[None], events: list[object], since: float,
                            ) -> float:
    async with asyncio.timeout(BOUND):
        await task
    final = events[-1]
    assert (getattr(final, "type", None), getattr(final, "reason", None)) == (
        "turn_aborted", "lease_lost"), final
    return time.monotonic() - since


async def test_a_run_turn_released_by_another_process_stops_at_once(
        kind: str, tmp_path: Path) -> None:
    async with _opened(kind, tmp_path) as store, _opened(kind, tmp_path) as other:
        chat_id, engine, stuck, events, task = await _stuck_run_turn(store)
        await _listening(store)
        released_at = time.monotonic()
        released = await release_chat(other, chat_id)  # the operator's process
        assert released is not None and released.reason == "released"
        took = await _ended_lease_lost(task, events, released_at)
        assert stuck.cancelled
        assert took < 1.0, took  # the watch's period (50 ms) or a notification
        await engine.aclose()


@contextlib.asynccontextmanager
async def _late_node() -> AsyncIterator[PostgresStore]:
    """Another node whose clock is past every lease held now (its sweep and begins
    take them as expired)."""
    later = datetime.now(UTC) + timedelta(seconds=LEASE + 60)
    async with PostgresStore.open(pg_support.DSN, schema=pg_support.SCHEMA, pool_max=2,
                                  clock=lambda: later) as other:
        yield other


@pytest.mark.usefixtures("pg_schema")
@pytest.mark.parametrize("by", ["sweep", "begin"])
async def test_a_run_turn_reclaimed_by_another_postgres_node_stops_at_once(by: str) -> None:
    async with _opened("postgres", Path()) as store, _late_node() as other:
        chat_id, engine, stuck, events, task = await _stuck_run_turn(store)
        await _listening(store)
        reclaimed_at = time.monotonic()
        if by == "sweep":
            assert await other.reclaim_expired() == 1
        else:
            backend = ScriptedBackend()
            second = TurnEngine(other, backend.adapters(), backend, lease_seconds=LEASE)
            async for _ in second.run_turn(chat_id, make_turn("mine now", tools=())):
                pass
            await second.aclose()
        took = await _ended_lease_lost(task, events, reclaimed_at)
        assert stuck.cancelled
        assert took < 1.0, took
        record = await store.load_turn(events[-1].turn_id)  # type: ignore[attr-defined]
        assert (record.status, record.reason) == (TurnStatus.ABORTED, "lease_expired")
        await engine.aclose()


async def test_no_watch_is_left_once_the_turns_end(tmp_path: Path) -> None:
    """SQLite's watch runs while turns are held here, and ends after them."""
    async with _opened("sqlite-file", tmp_path) as store:
        chat_id, engine, _, _, task = await _stuck_run_turn(store)
        log = store.turn_log  # type: ignore[attr-defined]
        assert log._watch is not None and not log._watch.done()
        await release_chat(store, chat_id)
        await task
        await engine.aclose()
        async with asyncio.timeout(5):
            await log._watch
        assert not log.signals.holding()

