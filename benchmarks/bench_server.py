"""The reference server under load (issue 13): SSE clients running turns on the emulators.

For N concurrent clients (1, 10, 100, 500; each its own chat, ``TURNS`` turns each) this
prints turns/s, p50/p99 time to the first SSE byte, p50/p99 whole-turn time and the
process RSS; then the server's added latency per turn at N = 1 over calling
``TurnEngine.run_turn`` directly on the same emulators and store. Server, emulators and
clients share one process and one event loop (as in the tests), so the client's own HTTP
and SSE parsing is counted in the server's figures: the added latency is an upper bound.
After each level it checks that every turn completed and no lease is left behind.

Run: ``python benchmarks/bench_server.py [N ...]``. Figures are noisy on a shared machine.
"""

from __future__ import annotations

import asyncio
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
from aiohttp import web

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._util import figure
from turnstate.engine import TurnEngine, TurnInput
from turnstate.providers._transport import AiohttpTransport
from turnstate.providers.emulated import EmulatedProviders
from turnstate.server import SERVER_REGISTRY, create_app, make_services
from turnstate.storage import SqliteStore

LEVELS = (1, 10, 100, 500)
TURNS = 3
SEQUENTIAL = 200
BODY = {"provider": "openai", "model": "gpt-4o", "system_prompt": "Be terse."}
AUTH = {"Authorization": "Bearer bench-token"}


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def one_turn(http: aiohttp.ClientSession, base: str, chat_id: str,
                   text: str) -> tuple[float, float]:
    """(time to first byte, whole turn) in seconds; raises unless the turn completed."""
    start = time.perf_counter()
    async with http.post(f"{base}/api/chats/{chat_id}/turns", json={**BODY, "text": text},
                         headers=AUTH) as response:
        if response.status != 200:
            msg = f"HTTP {response.status}: {await response.text()}"
            raise RuntimeError(msg)
        await response.content.readany()
        first = time.perf_counter() - start
        body = await response.read()
    if b"event: turn_completed" not in body:
        msg = "the turn did not complete"
        raise RuntimeError(msg)
    return first, time.perf_counter() - start


async def client(http: aiohttp.ClientSession, base: str, chat_id: str,
                 results: list[tuple[float, float]]) -> None:
    for index in range(TURNS):
        results.append(await one_turn(http, base, chat_id, f"turn {index}"))


async def level(n: int, http: aiohttp.ClientSession, base: str, store: SqliteStore) -> None:
    ids = []
    for _ in range(n):
        async with http.post(f"{base}/api/chats", headers=AUTH) as response:
            ids.append((await response.json())["id"])
    results: list[tuple[float, float]] = []
    began = time.perf_counter()
    outcomes = await asyncio.gather(*(client(http, base, c, results) for c in ids),
                                    return_exceptions=True)
    elapsed = time.perf_counter() - began
    errors = [o for o in outcomes if isinstance(o, BaseException)]
    leases = await store.fetch_raw("SELECT count(*) FROM chats WHERE active_turn_id IS NOT NULL")
    first, whole = [r[0] * 1000 for r in results], [r[1] * 1000 for r in results]
    print(f"-- N = {n} concurrent SSE clients, {TURNS} turns each")
    figure(f"N={n}: turns per second", len(results) / elapsed, "turn/s")
    figure(f"N={n}: time to first byte p50", pct(first, 0.5), "ms")
    figure(f"N={n}: time to first byte p99", pct(first, 0.99), "ms")
    figure(f"N={n}: turn time p50", pct(whole, 0.5), "ms")
    figure(f"N={n}: turn time p99", pct(whole, 0.99), "ms")
    figure(f"N={n}: RSS after the level", rss_mib(), "MiB")
    figure(f"N={n}: failed clients", len(errors), "")
    figure(f"N={n}: leases left behind", leases[0][0], "")
    if errors:
        print(f"   first error: {errors[0]!r}")


async def direct_turns(engine: TurnEngine, chat_id: str) -> list[float]:
    samples = []
    for index in range(SEQUENTIAL):
        turn = TurnInput(provider="openai", model="gpt-4o", system_prompt="Be terse.",
                         user_text=f"turn {index}")
        start = time.perf_counter()
        async for _ in engine.run_turn(chat_id, turn):
            pass
        samples.append(time.perf_counter() - start)
    return samples


async def served_turns(http: aiohttp.ClientSession, base: str, chat_id: str) -> list[float]:
    return [(await one_turn(http, base, chat_id, f"turn {i}"))[1] for i in range(SEQUENTIAL)]


async def main(levels: tuple[int, ...]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        async with EmulatedProviders(["openai"]) as stack, AiohttpTransport() as transport, \
                SqliteStore.open(Path(folder) / "bench.sqlite") as store:
            engine = TurnEngine(store, stack.adapters, transport, registry=SERVER_REGISTRY)
            services = make_services(engine, {"bench-token": "bench"}, emulators=stack)
            runner = web.AppRunner(create_app(services), handler_cancellation=True,
                                   access_log=None)
            await runner.setup()
            site = web.TCPSite(runner, "127.0.0.1", 0, backlog=1024)
            await site.start()
            base = f"http://127.0.0.1:{next(iter(runner.addresses))[1]}"
            connector = aiohttp.TCPConnector(limit=0)
            async with aiohttp.ClientSession(connector=connector) as http:
                await compare(engine, store, http, base)
                for n in levels:
                    await level(n, http, base, store)
            await runner.cleanup()


async def compare(engine: TurnEngine, store: SqliteStore, http: aiohttp.ClientSession,
                  base: str) -> None:
    direct_chat = await store.create_chat(owner="bench")
    async with http.post(f"{base}/api/chats", headers=AUTH) as response:
        served_chat = (await response.json())["id"]
    await direct_turns(engine, (await store.create_chat(owner="bench")).id)  # warm up
    direct = statistics.median(await direct_turns(engine, direct_chat.id)) * 1e6
    served = statistics.median(await served_turns(http, base, served_chat)) * 1e6
    print(f"-- N = 1, {SEQUENTIAL} sequential cursor turns each way (median)")
    figure("TurnEngine.run_turn directly, per turn", direct, "us")
    figure("through the server (HTTP + SSE + client), per turn", served, "us")
    figure("server's added latency per turn", served - direct, "us", budget=1000)


if __name__ == "__main__":
    chosen = tuple(int(a) for a in sys.argv[1:]) or LEVELS
    asyncio.run(main(chosen))
