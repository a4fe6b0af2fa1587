"""What a cursor turn's CPU owes to the turn before it: turnstate and the raw client after
different neighbours.

``bench_peers.py`` interleaves its clients turn by turn, so each turn runs after another
client's. This measures the same two turns, (a) the raw ``openai`` client and turnstate's
``TurnEngine`` (on an SQLite file and on a ``MemoryStore``), each right after one of:
nothing (the same client again), the Agents SDK's ``Runner.run`` (which shares the raw
client's ``openai`` and ``httpx`` code), a 16 MB memory walk in C (caches evicted, no
Python code run) and a 5 ms idle sleep. Per neighbour, the client process's CPU per turn
(median) and the ratio turnstate / raw client in the same rounds; neighbours rotate
within each round so drift hits them alike. On this machine a neighbour that runs the
same library warms the next turn's code: the raw client after the SDK costs about what it
costs alone, turnstate after the SDK about twice its alone figure.

Needs the ``bench`` extra. Run: ``python benchmarks/bench_neighbours.py [--rounds N]``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.bench_peers import (
    AgentsRun,
    RawOpenAI,
    Turnstate,
    TurnstateCursor,
    fake_openai,
)
from turnstate.providers import AiohttpTransport
from turnstate.storage import MemoryStore, SqliteStore

Step = Callable[[int], Awaitable[object]]
TURNS = 40  # timed turns per client, neighbour and round
WALK = bytearray(16 << 20)


async def walk(_: int) -> None:
    """Touch a 16 MB buffer, one byte per cache line, in C."""
    WALK[::64] = bytes(len(WALK) // 64)


async def idle(_: int) -> None:
    """A 5 ms sleep that blocks the loop (the core idles)."""
    time.sleep(0.005)  # noqa: ASYNC251 - the point: nothing runs, the core idles


async def cpu_of(step: Step, index: int) -> float:
    """``step(index)``'s process CPU time, in microseconds."""
    began = time.process_time()
    await step(index)
    return (time.process_time() - began) * 1e6


async def measure(rounds: int, clients: dict[str, Step], neighbours: dict[str, Step | None],
                  ) -> dict[tuple[str, str], list[float]]:
    """Per (client, neighbour), the CPU of each timed turn right after the neighbour's."""
    samples: dict[tuple[str, str], list[float]] = {}
    index = 1000
    for turn in range(rounds):
        names = list(neighbours)
        shift = turn % len(names)
        for neighbour in names[shift:] + names[:shift]:
            before = neighbours[neighbour]
            for client, step in clients.items():
                for _ in range(TURNS):
                    index += 1
                    await (before or step)(index)
                    samples.setdefault((client, neighbour), []).append(
                        await cpu_of(step, index))
    return samples


async def main(rounds: int) -> None:
    os.environ["OPENAI_API_KEY"] = "sk-bench-dummy"  # before any client reads it
    with tempfile.TemporaryDirectory() as tmp:
        async with fake_openai() as fake, \
                SqliteStore.open(str(Path(tmp) / "bench.db")) as store:
            transport = AiohttpTransport()
            raw, sdk = RawOpenAI(fake), AgentsRun(fake)
            sqlite = TurnstateCursor("sqlite", Turnstate(store, transport, f"{fake}/v1"))
            memory = TurnstateCursor("memory", Turnstate(MemoryStore(), transport,
                                                         f"{fake}/v1"))
            for cursor in (sqlite, memory):
                await cursor.start()
            clients: dict[str, Step] = {
                "(a) raw openai client": raw.turn,
                "(d) turnstate, SQLite file": sqlite.turn,
                "turnstate, MemoryStore": memory.turn,
            }
            neighbours: dict[str, Step | None] = {
                "itself": None, "Agents SDK Runner.run": sdk.turn,
                "16 MB memory walk": walk, "5 ms idle": idle}
            for index in range(1, 20):  # warm up: imports, connections, first cursors
                for step in (*clients.values(), sdk.turn):
                    await step(index)
            samples = await measure(rounds, clients, neighbours)
            await transport.aclose()
    print(f"client CPU per cursor turn (median of {rounds} x {TURNS}), by the turn before it")
    for neighbour in neighbours:
        base = statistics.median(samples["(a) raw openai client", neighbour])
        for client in clients:
            cpu = statistics.median(samples[client, neighbour])
            print(f"after {neighbour:<24} {client:<28} {cpu:>8.0f} us   "
                  f"{cpu / base:>5.2f}x the raw client")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=4)
    asyncio.run(main(parser.parse_args().rounds))
