"""bench_server's turn-events log figures (issue 21): what resumable turns cost.

- One ``turn_log.append`` on the SQLite file store, for batches of 1, 10 and 50 events:
  the cost of one log write, and per event inside it.
- The log's cost inside real turns: cursor turns run detached through the engine
  (``start_turn``, followed to their end, one after the other) with the store's
  ``append_many`` timed; the time spent in log writes per turn and per event, and the
  writes per turn (one writer for every turn of the process, at most 20 writes per
  second in all, so turns shorter than 50 ms share a write).
- The wait before a resume's first event, through the server over loopback: for a
  finished turn (read from the log) and for a running one on the same node (memory).
"""

from __future__ import annotations

import asyncio
import statistics
import time
from typing import Any

import aiohttp

from benchmarks._util import figure
from turnstate.core._conversation import TextPart
from turnstate.emulators._base import Fault
from turnstate.emulators._emulated import EmulatedProviders
from turnstate.engine import TurnEngine, TurnInput
from turnstate.storage import TurnAbort, TurnStart
from turnstate.storage._turn_log import LoggedEvent, turn_log_of

ROUNDS = 200
DELTA = '{"text":"lorem ipsum ","type":"text_delta"}'


async def append_costs(store: Any) -> None:
    log = turn_log_of(store)
    chat = await store.create_chat(owner="bench")
    for size in (1, 10, 50):
        samples = []
        for round_ in range(ROUNDS // 4):
            turn_id = f"log-{size}-{round_}"
            lease = await store.begin_turn(chat.id, TurnStart(
                turn_id=turn_id, user_parts=(TextPart(text="x"),), provider="openai",
                model="gpt-4o"))
            batch = [LoggedEvent(i, "text_delta", DELTA) for i in range(1, size + 1)]
            began = time.perf_counter_ns()
            await log.append(turn_id, batch)
            samples.append(time.perf_counter_ns() - began)
            await store.abort_turn(lease, TurnAbort(reason="cancelled"))
        median = statistics.median(samples) / 1000
        figure(f"turn log: one write of {size} event(s)", median, "us")
        figure(f"turn log: per event in a write of {size}", median / size, "us")


async def in_turns(engine: TurnEngine, store: Any) -> None:
    """Cursor turns run detached, the log's appends timed."""
    log = turn_log_of(store)
    spent: list[int] = []
    events = 0
    original = log.append_many

    async def timed(batches: Any) -> Any:
        nonlocal events
        began = time.perf_counter_ns()
        outcomes = await original(batches)
        spent.append(time.perf_counter_ns() - began)
        events += sum(len(batch.events) for batch in batches)
        return outcomes

    log.append_many = timed  # type: ignore[method-assign]
    detached, direct = [], []
    try:
        chat = await store.create_chat(owner="bench")
        for index in range(ROUNDS):  # interleaved, each a cursor turn after the first
            detached.append(await _detached_turn(engine, chat.id, index))
            direct.append(await _direct_turn(engine, chat.id, index))
        await engine.detached.settled()  # every turn's log written
    finally:
        log.append_many = original  # type: ignore[method-assign]
    figure("turn log: writes per cursor turn", len(spent) / ROUNDS, "")
    figure("turn log: write wall time per cursor turn", sum(spent) / ROUNDS / 1000, "us")
    figure("turn log: write wall time per event", sum(spent) / max(events, 1) / 1000, "us")
    figure("cursor turn, run_turn (median)", statistics.median(direct) / 1000, "us")
    figure("cursor turn, detached and followed (median)",
           statistics.median(detached) / 1000, "us")


def _turn(index: int) -> TurnInput:
    return TurnInput(provider="openai", model="gpt-4o", system_prompt="terse",
                     user_text=f"hello {index} " * 8, owner="bench")


async def _detached_turn(engine: TurnEngine, chat_id: str, index: int) -> int:
    began = time.perf_counter_ns()
    live = await engine.start_turn(chat_id, _turn(index))
    following = await engine.follow(chat_id, live.turn_id)
    async for _ in following.events:
        pass
    return time.perf_counter_ns() - began


async def _direct_turn(engine: TurnEngine, chat_id: str, index: int) -> int:
    began = time.perf_counter_ns()
    async for _ in engine.run_turn(chat_id, _turn(index)):
        pass
    return time.perf_counter_ns() - began


async def resume_waits(base: str, stack: EmulatedProviders) -> None:
    """Time to a resume's first event over loopback: a finished turn, a running one."""
    headers = {"Authorization": "Bearer bench-token"}
    # A fresh connection per request: an unfinished stream's connection is closed by the
    # client, and reusing the pool then mixes that close into the next request's time.
    connector = aiohttp.TCPConnector(force_close=True)
    async with aiohttp.ClientSession(base, headers=headers, connector=connector) as http:
        chat = (await (await http.post("/api/chats")).json())["id"]
        body = {"provider": "openai", "model": "gpt-4o", "text": "resume me"}
        async with http.post(f"/api/chats/{chat}/turns", json=body) as done:
            turn_id = done.headers["X-Turn-Id"]
            await done.read()
        await asyncio.sleep(0.1)  # the node's batched write of the final events lands
        finished = [await _first_event(http, chat, turn_id) for _ in range(ROUNDS // 2)]
        gate = asyncio.Event()
        stack.emulators["openai"].faults.push(Fault(gate=gate))
        running = await http.post(f"/api/chats/{chat}/turns", json=body)
        await running.content.readuntil(b"\n\n")
        live = [await _first_event(http, chat, running.headers["X-Turn-Id"])
                for _ in range(ROUNDS // 2)]
        gate.set()
        await running.read()
    figure("resume: wait for the first event, finished turn (log)",
           statistics.median(finished) / 1000, "us")
    figure("resume: wait for the first event, running turn (memory)",
           statistics.median(live) / 1000, "us")


async def _first_event(http: aiohttp.ClientSession, chat: str, turn_id: str) -> int:
    began = time.perf_counter_ns()
    async with http.get(f"/api/chats/{chat}/turns/{turn_id}/events?after=0") as response:
        await response.content.readuntil(b"\n\n")
        return time.perf_counter_ns() - began


async def report(engine: TurnEngine, store: Any, base: str, stack: EmulatedProviders) -> None:
    await append_costs(store)
    await in_turns(engine, store)
    await resume_waits(base, stack)
