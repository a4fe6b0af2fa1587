"""A stop asked on one process reaches a turn running on another process of the same
SQLite file within the log's ``data_version`` watch (50 ms), not the runner's 2 s poll.

Two stores on one file in one process are two connections, as two processes are. Before,
the running side learnt of the stop only from ``DetachedTurns``' poll of
``stop_requests`` every ``stop_poll_seconds`` (2 s): measured 2.0 s from the stop to the
turn's end."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from tests.storage.support import commit, start
from turnstate import AiohttpTransport, Tool, ToolSpec, TurnEngine, TurnInput
from turnstate.emulators import EmulatedProviders
from turnstate.storage import SqliteStore, TurnStatus, _sqlite_log
from turnstate.storage._turn_log import LoggedEvent, TurnLogFenced
from turnstate.testing import (
    ManualClock,
    emulated_providers,  # noqa: F401  (the fixture)
)

WAIT = 10.0  # a bound for a hang only; the times measured are asserted below
LANDS_WITHIN = 0.5  # seconds: the watch's period is 0.05 s, the poll's was 2 s


async def test_another_connections_stop_is_signalled_to_the_appending_one(
        tmp_path: Path) -> None:
    """The store whose turn appends to the log gets ``signals.stop_requested`` for a stop
    the other connection wrote, once, and forgets the turn after its final event."""
    path = tmp_path / "shared.sqlite"
    async with SqliteStore.open(path) as runner, SqliteStore.open(path) as other:
        chat = await runner.create_chat(owner="alice")
        await runner.begin_turn(chat.id, start("t1"))
        log, loop = runner.turn_log, asyncio.get_running_loop()
        signalled: list[str] = []
        arrived = asyncio.Event()
        log.signals.on_stop(lambda turn_id: (signalled.append(turn_id), arrived.set()))
        await log.append("t1", [LoggedEvent(1, "text_delta", "{}")])
        asked = loop.time()
        await other.turn_log.request_stop(chat.id, "t1")
        await asyncio.wait_for(arrived.wait(), WAIT)
        assert loop.time() - asked < LANDS_WITHIN
        assert signalled == ["t1"] and not log._running
        await log.append("t1", [LoggedEvent(2, "turn_aborted", "{}")])
        assert not log._running


async def test_a_stop_asked_before_the_first_append_is_signalled_at_it(tmp_path: Path) -> None:
    """A stop written before the turn's first append here is found at that append's
    next look, without any further write of the other connection."""
    path = tmp_path / "shared.sqlite"
    async with SqliteStore.open(path) as runner, SqliteStore.open(path) as other:
        chat = await runner.create_chat(owner="alice")
        await runner.begin_turn(chat.id, start("t1"))
        await other.turn_log.request_stop(chat.id, "t1")
        arrived = asyncio.Event()
        runner.turn_log.signals.on_stop(lambda turn_id: arrived.set())
        await runner.turn_log.append("t1", [LoggedEvent(1, "text_delta", "{}")])
        await asyncio.wait_for(arrived.wait(), WAIT)


async def test_a_detached_turn_stops_at_once_when_another_process_asks(
        tmp_path: Path, emulated_providers: EmulatedProviders) -> None:  # noqa: F811
    """A detached turn on engine A, stuck in a tool, ends ``stopped`` well within the
    2 s stop poll after engine B (another connection to the file) asks, once B's user
    sees its events (it was 2.05 s)."""
    path = tmp_path / "shared.sqlite"
    started = asyncio.Event()

    async def stuck(args: dict[str, Any]) -> dict[str, Any]:
        started.set()
        await asyncio.Event().wait()
        return {}  # pragma: no cover

    spec = ToolSpec(name="slow", description="a slow tool",
                    parameters={"type": "object", "properties": {}})
    turn = TurnInput(provider="openai", model="gpt-4o", system_prompt="s", turn_id="t-far",
                     user_text="[[call:slow]] go",
                     tools=(Tool(spec=spec, handler=stuck, timeout=60),))
    async with (SqliteStore.open(path) as a_store, SqliteStore.open(path) as b_store,
                AiohttpTransport() as transport):
        a = TurnEngine(a_store, emulated_providers.adapters, transport)
        b = TurnEngine(b_store, emulated_providers.adapters, transport)
        assert a.detached.stop_poll_seconds == 2.0
        chat = await a_store.create_chat(owner="alice")
        await a.detached.start(chat.id, turn)
        await asyncio.wait_for(started.wait(), WAIT)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + WAIT  # B's user presses stop once B shows the turn's events
        while not (await b_store.turn_log.read(chat.id, "t-far")).events:
            assert loop.time() < deadline
            await asyncio.sleep(0.01)
        asked = loop.time()
        await b.stop("t-far", chat_id=chat.id)
        await asyncio.wait_for(a.detached.settled(), WAIT)
        took = loop.time() - asked
        record = await b_store.load_turn("t-far")
        assert (record.status, record.reason) == (TurnStatus.ABORTED, "stopped")
        assert took < LANDS_WITHIN, took


async def test_the_watch_forgets_turns_that_append_no_more(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A turn whose append is refused (its lease was taken) is forgotten at once; one
    that ended without logging its final event at the watch's periodic look; then the
    watch ends (it does not poll the file for ever for them)."""
    monkeypatch.setattr(_sqlite_log, "WATCH_IDLE_SECONDS", 0.2)
    clock = ManualClock()
    async with SqliteStore.open(tmp_path / "one.sqlite", clock=clock) as store:
        log = store.turn_log
        await store.create_chat(owner="alice", chat_id="c1")
        await store.create_chat(owner="alice", chat_id="c2")
        lease = await store.begin_turn("c1", start("t1"))
        await store.begin_turn("c2", start("t2", lease_seconds=10))
        await log.append("t1", [LoggedEvent(1, "text_delta", "{}")])
        await log.append("t2", [LoggedEvent(1, "text_delta", "{}")])
        assert log._running == {"t1", "t2"}
        clock.advance(11)
        assert await store.reclaim_expired() == 1  # t2's
        with pytest.raises(TurnLogFenced):
            await log.append("t2", [LoggedEvent(2, "text_delta", "{}")])
        assert log._running == {"t1"}
        await store.commit_turn(lease, commit())  # its final event is never logged
        loop = asyncio.get_running_loop()
        deadline = loop.time() + WAIT
        while log._running or not (log._watch is None or log._watch.done()):
            assert loop.time() < deadline
            await asyncio.sleep(0.02)
