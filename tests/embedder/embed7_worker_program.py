"""Embedder (b), written from docs/api.md alone and checked with ``mypy --strict``: a
background worker process runs detached turns on an SQLite file, and a web tier in
another process follows them (resuming after the last id it sent) and stops one (embed7).

``python -m tests.embedder.embed7_worker_program PATH CHAT TURN`` is the worker: it runs
the turn against the loopback emulators (its Anthropic stream stalls after two events, a
provider that keeps the turn waiting), prints ``started``, and exits when the turn ended.
"""

from __future__ import annotations

import asyncio
import sys

from turnstate import (
    AiohttpTransport,
    LoggedEvent,
    SqliteStore,
    TurnEngine,
    TurnFinished,
    TurnInput,
    TurnRecord,
)


async def work(path: str, chat_id: str, turn_id: str) -> str:
    """The worker: one detached turn, its sweeps running; the final event's type."""
    from turnstate.emulators import EmulatedProviders, Fault

    async with EmulatedProviders() as providers, AiohttpTransport() as transport, \
            SqliteStore.open(path) as store, \
            TurnEngine(store, providers.adapters, transport) as engine:
        providers.emulators["anthropic"].faults.push(Fault(stall_after=2))
        sweeps = asyncio.create_task(engine.maintain())
        await engine.start_turn(chat_id, TurnInput(
            provider="anthropic", model="claude-sonnet-4-5", system_prompt="Be brief.",
            user_text="a long answer, please", turn_id=turn_id, owner="bob"))
        print("started", flush=True)
        following = await engine.follow(chat_id, turn_id, owner="bob")
        last = ""
        async for event in following.events:
            last = event.type
        sweeps.cancel()
        return last


async def web_tier(path: str, chat_id: str, turn_id: str) -> tuple[list[LoggedEvent], str]:
    """The web tier (no adapters: it runs no turn): follow the worker's turn, stop it at
    its first event, resume after the last id sent (as an SSE client's
    ``Last-Event-ID``), and ask again once it ended."""
    async with AiohttpTransport() as transport, SqliteStore.open(path) as store, \
            TurnEngine(store, {}, transport) as engine:
        seen: list[LoggedEvent] = []
        following = await engine.follow(chat_id, turn_id, owner="bob")
        async for event in following.events:
            seen.append(event)
            record: TurnRecord = await engine.stop(turn_id, owner="bob", chat_id=chat_id)
            assert record.id == turn_id
            break  # the client's connection dropped here
        resumed = await engine.follow(chat_id, turn_id, after=seen[-1].id, owner="bob")
        seen += [event async for event in resumed.events]
        try:
            await engine.stop(turn_id, owner="bob", chat_id=chat_id)
        except TurnFinished as finished:
            return seen, f"{finished.state} {finished.reason}"
        return seen, "still running"


if __name__ == "__main__":  # pragma: no cover - run by the test in its own process
    print("ended", asyncio.run(work(*sys.argv[1:4])), flush=True)
