"""An embedder shuts its engine down before its store and transport (embedder3).

Before, ``TurnEngine`` had no close: a detached turn (``start_turn``) still running when
the embedder's ``async with`` blocks closed the transport and the store ran on against
them, its lease renewals failing, its abort unrecorded (the turn stayed ``in_progress``,
its chat held until the lease ran out) and asyncio reported "Task was destroyed but it
is pending" for the log writer. The sweeps a process of detached turns needs (ending a
dead node's turns, deleting old event logs) were reachable only through the engine's
``detached`` attribute, which the server uses and the docs never named: an embedder's
logs grew without end.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from turnstate import AiohttpTransport, MemoryStore, SqliteStore, TurnEngine, TurnInput
from turnstate.emulators import EmulatedProviders, Fault
from turnstate.storage import TurnStart
from turnstate.storage._turn_log import turn_log_of
from turnstate.testing import ManualClock, emulated_providers, turn_events
from turnstate.testing._fixtures import engine_on

__all__ = ["emulated_providers"]  # the fixture, imported for pytest

WAIT = 10.0


def question(text: str = "hello there") -> TurnInput:
    return TurnInput(provider="openai", model="gpt-4o", system_prompt="Be brief.",
                     user_text=text)


def engine_tasks() -> list[str]:
    names = ("turn ", "turn log writer", "turn stop poller")
    return [task.get_name() for task in asyncio.all_tasks()
            if task.get_name().startswith(names)]


async def sent(providers: EmulatedProviders, count: int) -> None:
    deadline = asyncio.get_running_loop().time() + WAIT
    while len(providers.emulators["openai"].requests) < count:
        assert asyncio.get_running_loop().time() < deadline, "the request was never sent"
        await asyncio.sleep(0.01)  # a bounded poll of the emulator's request log


async def test_closing_the_engine_ends_its_detached_turns_before_the_store_closes(
        emulated_providers: EmulatedProviders, tmp_path: object) -> None:
    path = f"{tmp_path}/chats.sqlite"
    async with AiohttpTransport() as transport, SqliteStore.open(path) as store:
        chat = await store.create_chat(owner="alice")
        async with TurnEngine(store, emulated_providers.adapters, transport) as engine:
            sweeper = asyncio.create_task(engine.maintain())
            emulated_providers.emulators["openai"].faults.push(Fault(stall_after=2))
            live = await engine.start_turn(chat.id, question())
            following = await engine.follow(chat.id, live.turn_id)
            await sent(emulated_providers, 1)  # its stream has begun, and hangs
        await asyncio.wait([sweeper])  # cancelled, or returned if it had not begun
        assert engine_tasks() == []
        record = await store.load_turn(live.turn_id)
        assert (record.status.value, record.reason) == ("aborted", "cancelled")
        events = [event async for event in following.events]
        assert events[-1].type == "turn_aborted"
        # the chat is free at once, not when the lease runs out
        async with TurnEngine(store, emulated_providers.adapters, transport) as again:
            done = await turn_events(again.run_turn(chat.id, question("again")))
        assert done[-1].type == "turn_completed"
        assert await engine.aclose() == 0  # closing twice is harmless


async def test_maintain_ends_a_dead_nodes_turn_and_expires_old_logs(
        emulated_providers: EmulatedProviders) -> None:
    clock = ManualClock(datetime(2026, 12, 5, tzinfo=UTC))
    store = MemoryStore(clock=clock)
    chat = await store.create_chat(owner="alice")
    dead = await store.create_chat(owner="alice")
    async with AiohttpTransport() as transport, \
            TurnEngine(store, emulated_providers.adapters, transport, clock=clock) as engine:
        live = await engine.start_turn(chat.id, question())
        following = await engine.follow(chat.id, live.turn_id)
        assert [event async for event in following.events][-1].type == "turn_completed"
        await engine.detached.settled()
        log = turn_log_of(store)
        assert (await log.read(chat.id, live.turn_id, after=0, limit=100)).events
        # another node took the other chat and died: its lease is never renewed
        await store.begin_turn(dead.id, TurnStart(turn_id="dead-node-turn",
                                                  user_parts=(), provider="openai",
                                                  model="gpt-4o", lease_seconds=30))
        clock.advance(11 * 60)  # past the lease and the log's ten minutes
        sweeper = asyncio.create_task(engine.maintain(every=0.01))
        deadline = asyncio.get_running_loop().time() + WAIT
        while (await store.load_turn("dead-node-turn")).status.value == "in_progress" or \
                (await log.read(chat.id, live.turn_id, after=0, limit=100)).events:
            assert asyncio.get_running_loop().time() < deadline, "maintain swept nothing"
            await asyncio.sleep(0.01)  # a bounded poll of the sweep's effect
        assert (await store.load_turn("dead-node-turn")).reason == "lease_expired"
    assert sweeper.cancelled()


async def test_the_testing_fixtures_engine_is_closed_after_the_test(
        emulated_providers: EmulatedProviders) -> None:
    """``turnstate.testing.emulated_engine`` said "closed after the test" but closed only
    its transport: a test's detached turn ran on past it."""
    async with engine_on(emulated_providers) as engine:
        chat = await engine.store.create_chat(owner="alice")
        emulated_providers.emulators["openai"].faults.push(Fault(stall_after=2))
        live = await engine.start_turn(chat.id, question())
        await sent(emulated_providers, 1)
    record = await engine.store.load_turn(live.turn_id)
    assert (record.status.value, record.reason) == ("aborted", "cancelled")
    assert engine_tasks() == []
