"""A turn whose lease the store took from it stops at once, not at its next renewal
(lifecycle5).

A turn stuck in a long tool call publishes nothing (so no log append is refused), and a
turn iterated with ``run_turn`` logs nothing: both learnt that an operator released
their chat (``turnstate release``) or another engine reclaimed it only at their next
renewal, a third of the lease later (10 s by default), their tool running all the while.
The store now signals the fence (``TurnSignals.fenced``: in-process at once; PostgreSQL's
other nodes by notification; SQLite's other processes through the file watch of their
running turns) and the engine's ``LeaseKeeper`` loses the lease then: the tool is
cancelled and the turn ends ``lease_lost``.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests import pg_support
from tests.engine.support import FakeClock, make_turn, tool
from turnstate.emulators._scripted import ScriptedBackend, ScriptStep
from turnstate.engine import TurnEngine
from turnstate.storage import MemoryStore, PostgresStore, SqliteStore, Store, TurnStatus
from turnstate.storage._release import release_chat

LEASE = 30.0  # renewals every 10 s: a fence learnt at a renewal would fail the bound
BOUND = 3.0
STORES = ["memory", "sqlite-file", "postgres"]


@contextlib.asynccontextmanager
async def _opened(kind: str, tmp_path: Path) -> AsyncIterator[Store]:
    if kind == "memory":
        yield MemoryStore()
    elif kind == "sqlite-file":
        async with SqliteStore.open(tmp_path / "chats.db") as sqlite:
            yield sqlite
    else:
        async with PostgresStore.open(pg_support.DSN, schema=pg_support.SCHEMA,
                                      pool_max=4) as postgres:
            yield postgres


@pytest.fixture(params=STORES)
def kind(request: pytest.FixtureRequest) -> str:
    if request.param == "postgres":
        request.getfixturevalue("pg_schema")
    return str(request.param)


class StuckTool:
    """A tool that runs until cancelled; ``running`` once it has started."""

    def __init__(self) -> None:
        self.running = asyncio.Event()
        self.cancelled = False

    async def __call__(self, _: dict[str, Any]) -> Any:
        self.running.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled = True
            raise


async def _stuck_run_turn(store: Store) -> tuple[
        str, TurnEngine, StuckTool, list[Any], asyncio.Task[None]]:
    """A new chat's turn iterated with ``run_turn`` in a task, once stuck in its tool:
    the chat's id, the engine, the tool, the events so far and the task."""
    chat = await store.create_chat(owner="alice")
    stuck = StuckTool()
    engine, turn = _engine(store, stuck)
    events: list[Any] = []

    async def consume() -> None:
        async for event in engine.run_turn(chat.id, turn):
            events.append(event)

    task = asyncio.create_task(consume())
    await stuck.running.wait()
    return chat.id, engine, stuck, events, task


def _engine(store: Store, stuck: StuckTool) -> tuple[TurnEngine, Any]:
    backend = ScriptedBackend()
    backend.push("openai", ScriptStep.call(("slow", {"city": "Oslo"})))
    engine = TurnEngine(store, backend.adapters(), backend, lease_seconds=LEASE)
    turn = make_turn("hello", tools=(tool("slow", stuck, timeout=600),))
    return engine, turn


async def test_a_released_run_turn_stuck_in_a_tool_stops_at_once(kind: str,
                                                                  tmp_path: Path) -> None:
    async with _opened(kind, tmp_path) as store:
        chat_id, engine, stuck, events, task = await _stuck_run_turn(store)
        released_at = time.monotonic()
        released = await release_chat(store, chat_id)
        assert released is not None and released.reason == "released"
        async with asyncio.timeout(BOUND):
            await task
        took = time.monotonic() - released_at
        final = events[-1]
        assert (final.type, final.reason) == ("turn_aborted", "lease_lost"), final
        assert stuck.cancelled
        assert took < BOUND, took
        record = await store.load_turn(final.turn_id)
        assert (record.status, record.reason) == (TurnStatus.ABORTED, "released")
        await engine.aclose()


async def test_a_detached_turn_released_by_another_process_stops_at_once(
        kind: str, tmp_path: Path) -> None:
    if kind == "memory":
        pytest.skip("a memory store has one process")
    async with _opened(kind, tmp_path) as store, _opened(kind, tmp_path) as other:
        chat = await store.create_chat(owner="alice")
        stuck = StuckTool()
        engine, turn = _engine(store, stuck)
        live = await engine.start_turn(chat.id, turn)
        await stuck.running.wait()
        writer = engine.detached._writer  # every event so far logged: no append to refuse
        if writer is not None:
            await writer
        assert live.logged_through == live.last_id
        released = await release_chat(other, chat.id)  # the operator's process
        assert released is not None and released.reason == "released"
        assert live.task is not None
        async with asyncio.timeout(BOUND):
            await live.task
        assert live.final is not None
        assert (live.final.type, getattr(live.final, "reason", None)) == (
            "turn_aborted", "lease_lost"), live.final
        assert stuck.cancelled
        await engine.aclose()


async def test_a_turn_reclaimed_by_another_engine_here_stops_at_once() -> None:
    clock = FakeClock()
    store = MemoryStore(clock=clock)
    chat_id, _, stuck, events, task = await _stuck_run_turn(store)
    clock.advance(seconds=LEASE + 1)  # the store's clock: its lease ran out there
    backend = ScriptedBackend()
    other = TurnEngine(store, backend.adapters(), backend, lease_seconds=LEASE)
    async for _ in other.run_turn(chat_id, make_turn("mine now", tools=())):
        pass
    async with asyncio.timeout(BOUND):
        await task
    assert (events[-1].type, events[-1].reason) == ("turn_aborted", "lease_lost")
    assert stuck.cancelled
