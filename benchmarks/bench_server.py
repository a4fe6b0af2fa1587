"""The reference server under load (issue 13): SSE clients running turns on the emulators.

The server (with its SQLite store) runs in this process; the clients run in a separate
process (this script with ``--client``), so their HTTP and SSE parsing is not counted as
the server's work; the OpenAI emulator runs in a third (``turnstate emulate``), so the
server's CPU is turnstate's alone (``--emulator inline`` runs it in the server's process,
as before issue 26; the turn log's figures always use an in-process one, whose fault
gate holds a turn running). Two parts:

1. The server's added cost per turn at N = 1: ``SEQUENTIAL`` turns (a new chat every
   ``CHAT_TURNS`` turns, so the history stays short) through the server, against the
   same turns by calling ``TurnEngine.run_turn`` directly here. Reported: the median
   wall time each way and their difference (the added latency, budget 1 ms; it still
   includes the loopback round trip and the client reading the last event), and the
   CPU per turn of the server process each way (the server's own added work, measured
   with ``time.process_time`` around the client's run) and of the client process.
2. For N concurrent clients (1, 10, 100, 500; each its own chat, ``TURNS`` turns each,
   in rounds until the level has served ``LEVEL_TURNS`` turns at least): turns/s,
   p50/p99 time to the first SSE byte, p50/p99 whole-turn time, the CPU per turn of the
   server (and the garbage collector's share of it; with several rounds, the lowest and
   highest round), the emulator and the client processes (on 2 cores, turns/s cannot
   pass 2 s over their sum), the server's RSS; then a check that every turn completed
   and no lease is left behind.

Run: ``python benchmarks/bench_server.py [N ...]`` (``--help`` lists the options;
``--profile FILE`` writes CPU profiles of the served and the direct turns of part 1
(FILE and FILE's stem + ``.direct``) and prints where the served ones spend more; the
clients run at nice 19 unless ``--client-nice N`` says otherwise, see ``CLIENT_NICE``).
``--processes P [--db DSN]`` runs the load levels instead against P ``turnstate serve``
processes sharing one PostgreSQL schema (``_server_processes``). Figures are noisy on a
shared 2-core machine: run it several times and compare medians.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import gc
import json
import os
import resource
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Collection, Iterator, Sequence
from pathlib import Path
from typing import Any

import aiohttp
import attrs
from aiohttp import web

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import _turn_log as turn_log
from benchmarks._profile_diff import dump, print_extra
from benchmarks._server_processes import (
    DEFAULT_DSN,
    cpu_seconds,
    emulator_process,
    leases_left,
    servers,
)
from benchmarks._server_processes import report as report_processes
from benchmarks._util import error_kinds, figure
from turnstate.core._event_json import event_json
from turnstate.core._events import TurnEvent
from turnstate.emulators._emulated import EmulatedProviders
from turnstate.engine import TurnEngine, TurnInput
from turnstate.engine._detached import DetachedTurns
from turnstate.engine._live import LiveTurn
from turnstate.providers._transport import AiohttpTransport
from turnstate.server import (
    SERVER_REGISTRY,
    ServerConfig,
    Services,
    create_app,
    make_services,
)
from turnstate.server._metrics import Metrics
from turnstate.server._serve import tune_collector
from turnstate.server._sse import sse_frame
from turnstate.storage import SqliteStore
from turnstate.storage._turn_log import LogBatch, TurnSignals

LEVELS = (1, 10, 100, 500)
TURNS = 3
LEVEL_TURNS = 300
"""A level runs rounds of N clients x ``TURNS`` turns (new chats each round) until it has
served at least this many turns, so that its CPU per turn is a mean over the process's
periodic work (a collection of the older generations, an SQLite checkpoint every 256
writes, a log write per 50 ms): a level of 30 turns (N = 10, one round) moved by several
hundred microseconds per turn with whether one of those fell inside it (issue 26)."""
SEQUENTIAL = 200
CHAT_TURNS = 10
WARMUP = 20
ROUNDS = 10
BODY = {"provider": "openai", "model": "gpt-4o", "system_prompt": "Be terse."}
AUTH = {"Authorization": "Bearer bench-token"}
BENCH_CONFIG = ServerConfig(max_streams_per_owner=1_000_000, max_turns_per_owner=1_000_000)
"""Every client is the one owner ``bench``: no per-owner bound on streams or turns."""
CLIENT_NICE = 19
"""Part 1's client process runs at the lowest priority, standing for a client on another
machine (the load levels' client runs at full priority, so it keeps up). At the same
priority (``--client-nice 0``), on a 2-core box, each SSE write can wake the client on
the server's core, where it preempts the server mid-turn (the final write then takes
~300 us of wall for ~60 us of CPU), and that was counted as the server's added latency.
Niced, the client's own scheduling delay still counts."""


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# -- the client process ---------------------------------------------------------------

async def one_turn(http: aiohttp.ClientSession, base: str, chat_id: str,
                   text: str) -> tuple[float, float]:
    """(time to first byte, whole turn) in seconds; raises unless the turn completed."""
    start = time.perf_counter()
    async with http.post(f"{base}/api/chats/{chat_id}/turns", json={**BODY, "text": text},
                         headers=AUTH) as response:
        if response.status != 200:
            msg = f"HTTP {response.status}: {await response.text()}"
            raise RuntimeError(msg)
        body = await response.content.readany()
        first = time.perf_counter() - start
        body += await response.content.read()
    if b"event: turn_completed" not in body:
        msg = "the turn did not complete"
        raise RuntimeError(msg)
    return first, time.perf_counter() - start


async def new_chat(http: aiohttp.ClientSession, base: str) -> str:
    async with http.post(f"{base}/api/chats", headers=AUTH) as response:
        if response.status != 201:
            msg = f"HTTP {response.status}: {await response.text()}"
            raise RuntimeError(msg)
        return str((await response.json())["id"])


async def client(http: aiohttp.ClientSession, base: str, turns: int, chat_turns: int,
                 results: list[tuple[float, float]]) -> None:
    chat_id = ""
    for index in range(turns):
        if index % chat_turns == 0:
            chat_id = await new_chat(http, base)
        results.append(await one_turn(http, base, chat_id, f"turn {index}"))


async def run_clients(base: str, n: int, turns: int, chat_turns: int) -> dict[str, Any]:
    """N concurrent clients; what the server process reads back as JSON. ``base`` may
    name several servers (comma-separated): client i talks to server i mod their number."""
    results: list[tuple[float, float]] = []
    bases = base.split(",")
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as http:
        for one in bases:
            await new_chat(http, one)  # the connection is open before the clock starts
        cpu, began = cpu_times(), time.perf_counter()
        outcomes = await asyncio.gather(
            *(client(http, bases[i % len(bases)], turns, chat_turns, results)
              for i in range(n)), return_exceptions=True)
        elapsed, done = time.perf_counter() - began, cpu_times()
    used = (done[0] - cpu[0], done[1] - cpu[1])
    errors = [repr(o) for o in outcomes if isinstance(o, BaseException)]
    return {"samples": results, "errors": errors, "elapsed": elapsed, "cpu": used}


async def client_main(base: str, nice: int) -> None:
    """Serve run requests (``N TURNS CHAT_TURNS`` lines on stdin) with JSON lines.

    ``nice`` lowers this process's priority first (part 1's clients: ``CLIENT_NICE``).
    """
    os.nice(nice)
    loop = asyncio.get_running_loop()
    while line := await loop.run_in_executor(None, sys.stdin.readline):
        n, turns, chat_turns = (int(word) for word in line.split())
        print(json.dumps(await run_clients(base, n, turns, chat_turns)), flush=True)


# -- the server process ---------------------------------------------------------------

class Clients:
    """The client process: started once, asked for runs; the server's CPU is added."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc

    @classmethod
    async def start(cls, base: str, nice: int = 0) -> Clients:
        return cls(await asyncio.create_subprocess_exec(
            sys.executable, __file__, "--client", base, str(nice),
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE))

    async def run(self, n: int, turns: int, chat_turns: int, *,
                  check: bool = True) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        cpu = time.process_time()
        self.proc.stdin.write(f"{n} {turns} {chat_turns}\n".encode())
        line = await self.proc.stdout.readline()
        if not line:
            msg = f"the client process exited {await self.proc.wait()}"
            raise RuntimeError(msg)
        result: dict[str, Any] = json.loads(line)
        result["server_cpu"] = time.process_time() - cpu
        if check and result["errors"]:
            msg = f"{len(result['errors'])} client(s) failed, first: {result['errors'][0]}"
            raise RuntimeError(msg)
        return result

    async def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        await self.proc.wait()


async def level(n: int, clients: Clients, store: SqliteStore, engine: TurnEngine,
                emulator_pid: int | None) -> None:
    emulator_before = cpu_seconds(emulator_pid) if emulator_pid else 0.0
    rounds = max(1, -(-LEVEL_TURNS // (n * TURNS)))
    result: dict[str, Any] = {"samples": [], "errors": [], "elapsed": 0.0,
                              "cpu": [0.0, 0.0], "server_cpu": 0.0}
    per_round: list[float] = []
    with gc_clock() as gc_seconds:
        for _ in range(rounds):
            cpu = time.process_time()
            one = await clients.run(n, TURNS, TURNS, check=False)
            await engine.detached.settled()  # the round's log writes are the server's
            one["server_cpu"] = time.process_time() - cpu
            per_round.append(one["server_cpu"] / max(1, len(one["samples"])) * 1e6)
            for key in ("samples", "errors"):
                result[key] += one[key]
            for key in ("elapsed", "server_cpu"):
                result[key] += one[key]
            result["cpu"] = [a + b for a, b in zip(result["cpu"], one["cpu"], strict=True)]
    samples = result["samples"]
    leases = await store.fetch_raw("SELECT count(*) FROM chats WHERE active_turn_id IS NOT NULL")
    first, whole = [s[0] * 1000 for s in samples], [s[1] * 1000 for s in samples]
    turns = max(1, len(samples))
    print(f"-- N = {n} concurrent SSE clients, {TURNS} turns each, {rounds} round(s), "
          f"{len(samples)} turns (clients in another process)")
    figure(f"N={n}: turns per second", len(samples) / result["elapsed"], "turn/s")
    figure(f"N={n}: time to first byte p50", pct(first, 0.5), "ms")
    figure(f"N={n}: time to first byte p99", pct(first, 0.99), "ms")
    figure(f"N={n}: turn time p50", pct(whole, 0.5), "ms")
    figure(f"N={n}: turn time p99", pct(whole, 0.99), "ms")
    figure(f"N={n}: server CPU per turn", result["server_cpu"] / turns * 1e6, "us")
    if rounds > 1:
        figure(f"N={n}:    rounds' lowest", min(per_round), "us")
        figure(f"N={n}:    rounds' highest", max(per_round), "us")
    figure(f"N={n}:    of which garbage collection", gc_seconds[0] / turns * 1e6, "us")
    if emulator_pid:
        figure(f"N={n}: emulator process CPU per turn (10 ms ticks)",
               (cpu_seconds(emulator_pid) - emulator_before) / turns * 1e6, "us")
    figure(f"N={n}: client process CPU per turn", sum(result["cpu"]) / turns * 1e6, "us")
    figure(f"N={n}: server RSS after the level", rss_mib(), "MiB")
    figure(f"N={n}: failed clients", len(result["errors"]), "")
    figure(f"N={n}: leases left behind", leases[0][0], "")
    if result["errors"]:
        print(f"   first error: {result['errors'][0]}")
        error_kinds(result["errors"])


@contextlib.contextmanager
def gc_clock() -> Iterator[list[float]]:
    """The wall time the garbage collector ran inside the block (``[seconds]``)."""
    spent, started = [0.0], [0.0]

    def clock(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            started[0] = time.perf_counter()
        else:
            spent[0] += time.perf_counter() - started[0]

    gc.callbacks.append(clock)
    try:
        yield spent
    finally:
        gc.callbacks.remove(clock)


def cpu_times() -> tuple[float, float]:
    """This process's (user, system) CPU seconds so far, every thread included.

    ``getrusage``, not ``os.times``: the latter counts in clock ticks (10 ms here), far
    coarser than a round of turns' difference, so its per-turn figures came in 50 us steps.
    """
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime, usage.ru_stime


async def direct_turns(engine: TurnEngine, store: SqliteStore, turns: int) -> list[float]:
    """The wall time of each turn, calling the engine directly."""
    samples, chat_id = [], ""
    for index in range(turns):
        if index % CHAT_TURNS == 0:
            chat_id = (await store.create_chat(owner="bench")).id
        turn = TurnInput(provider="openai", model="gpt-4o", system_prompt="Be terse.",
                         user_text=f"turn {index}", owner="bench")
        start = time.perf_counter()
        async for _ in engine.run_turn(chat_id, turn):
            pass
        samples.append(time.perf_counter() - start)
    return samples


async def compare(engine: TurnEngine, store: SqliteStore, clients: Clients,
                  profile: Path | None) -> None:
    """Direct and served batches interleaved, so both meet the same load on the machine."""
    await direct_turns(engine, store, WARMUP)
    await clients.run(1, WARMUP, CHAT_TURNS)
    wall: dict[str, list[float]] = {"direct": [], "served": []}
    cpu = {key: [0.0, 0.0] for key in ("direct", "served", "client")}
    profilers = {key: cProfile.Profile(time.process_time) for key in ("direct", "served")
                 } if profile else {}
    HANDLER_SECONDS.clear()
    for _ in range(ROUNDS):
        before = cpu_times()
        with profiling(profilers.get("direct")):
            wall["direct"] += await direct_turns(engine, store, SEQUENTIAL // ROUNDS)
        middle = cpu_times()
        with profiling(profilers.get("served")):
            result = await clients.run(1, SEQUENTIAL // ROUNDS, CHAT_TURNS)
            await engine.detached.settled()  # its turns' log writes are the server's
        after = cpu_times()
        wall["served"] += [sample[1] for sample in result["samples"]]
        for index in (0, 1):
            cpu["direct"][index] += middle[index] - before[index]
            cpu["served"][index] += after[index] - middle[index]
            cpu["client"][index] += result["cpu"][index]
    if profile:
        dump(profilers["direct"], profilers["served"], profile)
        print_extra(profilers["direct"], profilers["served"], SEQUENTIAL)
    report(wall, statistics.median(HANDLER_SECONDS), cpu)


@contextlib.contextmanager
def profiling(profiler: cProfile.Profile | None) -> Iterator[None]:
    if profiler is not None:
        profiler.enable()
    try:
        yield
    finally:
        if profiler is not None:
            profiler.disable()


def report(wall: dict[str, list[float]], handler: float, cpu: dict[str, list[float]]) -> None:
    direct_us = statistics.median(wall["direct"]) * 1e6
    served_us = statistics.median(wall["served"]) * 1e6
    print(f"-- N = 1, {SEQUENTIAL} sequential cursor turns each way, {ROUNDS} interleaved "
          f"rounds ({CHAT_TURNS} turns per chat; median wall, mean CPU)")
    figure("TurnEngine.run_turn directly, wall per turn", direct_us, "us")
    figure("through the server (client in another process), wall", served_us, "us")
    figure("server's added latency per turn", served_us - direct_us, "us", budget=1000)
    figure("server handler (middlewares to return), wall per turn", handler * 1e6, "us")
    figure("handler's added latency per turn (no HTTP parsing, no client)",
           handler * 1e6 - direct_us, "us")
    per_turn = {key: [c / SEQUENTIAL * 1e6 for c in pair] for key, pair in cpu.items()}
    for key, label in (("direct", "TurnEngine.run_turn directly"), ("served", "server process"),
                       ("client", "client process (HTTP + SSE parsing)")):
        figure(f"{label}, CPU per turn (user + sys)", sum(per_turn[key]), "us")
        figure("   of which system (kernel) time", per_turn[key][1], "us")
    added = sum(per_turn["served"]) - sum(per_turn["direct"])
    figure("server's added CPU per turn", added, "us", budget=1000)


HANDLER_SECONDS: list[float] = []


@web.middleware
async def handler_clock(request: web.Request, handler: Any) -> web.StreamResponse:
    """The server's own time per turn: from the middlewares to the handler's return."""
    start = time.perf_counter()
    try:
        return await handler(request)  # type: ignore[no-any-return]
    finally:
        if request.path.endswith("/turns"):
            HANDLER_SECONDS.append(time.perf_counter() - start)


class AcceptingLog:
    """The stub's turn log: takes every batch and keeps nothing. The stub's turns have no
    rows in the store, so the store's log refuses them (``TurnNotFound``), and until
    issue 26 the stub measured a refused write and its warning on stderr every turn; the
    log's real cost per turn is the turn log part's figure."""

    def __init__(self) -> None:
        self.signals = TurnSignals()

    async def append_many(self, batches: Sequence[LogBatch]) -> tuple[None, ...]:
        return (None,) * len(batches)

    async def stop_requests(self, turn_ids: Collection[str]) -> frozenset[str]:
        return frozenset()


class StubStore:
    """The store with the stub's log in place of its own (everything else delegated)."""

    def __init__(self, store: SqliteStore) -> None:
        self.store, self.turn_log = store, AcceptingLog()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)


class StubEngine:
    """The engine's surface the routes use, replaying one recorded turn's events at once."""

    def __init__(self, engine: TurnEngine, events: list[TurnEvent]) -> None:
        self.registry, self.adapters, self.limits = engine.registry, engine.adapters, \
            engine.limits
        self.store = StubStore(engine.store)
        self.clock = engine.clock
        self.events = events
        # Turns run detached (issue 21): numbered, fanned out, logged, as the real ones.
        self.endings: dict[str, Any] = {}
        self.attached: dict[str, Any] = {}  # no ``run_turn`` turn runs here
        self.lease_seconds = engine.lease_seconds
        self.detached = DetachedTurns(self, encode=event_json)

    async def run_turn(self, chat_id: str, turn: TurnInput) -> AsyncIterator[TurnEvent]:
        for event in self.events:
            yield event

    def run_detached_turn(self, chat_id: str, turn: TurnInput) -> AsyncIterator[TurnEvent]:
        return self.run_turn(chat_id, turn)  # what the detached runner iterates

    async def start_turn(self, chat_id: str, turn: TurnInput) -> LiveTurn:
        return await self.detached.start(chat_id, turn)


async def recorded_turn(engine: TurnEngine, store: SqliteStore) -> list[TurnEvent]:
    """The events of a cursor turn (the second of a chat)."""
    chat_id = (await store.create_chat(owner="bench")).id
    events: list[TurnEvent] = []
    for text in ("one", "two"):
        turn = TurnInput(provider="openai", model="gpt-4o", system_prompt="Be terse.",
                         user_text=text)
        events = [event async for event in engine.run_turn(chat_id, turn)]
    return events


async def serving(app: web.Application) -> tuple[web.AppRunner, Clients]:
    runner = web.AppRunner(app, handler_cancellation=True, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0, backlog=1024).start()
    return runner, await Clients.start(f"http://127.0.0.1:{next(iter(runner.addresses))[1]}")


def bare_app(events: list[TurnEvent]) -> web.Application:
    """The floor: aiohttp answering the same request with the same body in one write."""
    body = b"".join(sse_frame(event) for event in events)

    async def turn(request: web.Request) -> web.Response:
        await request.read()
        return web.Response(body=body, content_type="text/event-stream")

    async def chat(request: web.Request) -> web.Response:
        return web.json_response({"id": "c"}, status=201)

    app = web.Application()
    app.router.add_post("/api/chats/{chat_id}/turns", turn)
    app.router.add_post("/api/chats", chat)
    return app


async def own_work(engine: TurnEngine, store: SqliteStore, services: Services) -> None:
    """The server's own CPU per turn with the engine stubbed, and bare aiohttp's floor."""
    events = await recorded_turn(engine, store)
    stub = attrs.evolve(services, engine=StubEngine(engine, events), metrics=Metrics())
    print(f"-- the server's own work: {SEQUENTIAL} turns, the engine replaced by a replay "
          f"of a recorded cursor turn ({len(events)} events), client in another process")
    figures = {}
    for name, app in (("turnstate server, engine stubbed", create_app(stub)),
                      ("bare aiohttp, same request and body", bare_app(events))):
        runner, clients = await serving(app)
        try:
            await clients.run(1, WARMUP, CHAT_TURNS)
            result = await clients.run(1, SEQUENTIAL, CHAT_TURNS)
        finally:
            await clients.close()
            await runner.cleanup()
        figures[name] = result["server_cpu"] / SEQUENTIAL * 1e6
        wall = statistics.median(sample[1] for sample in result["samples"]) * 1e6
        figure(f"{name}: server CPU per turn", figures[name], "us")
        figure(f"{name}: wall per turn (client's view)", wall, "us")
    stubbed, bare = figures.values()
    figure("turnstate's own server code per turn (stubbed - bare)", stubbed - bare, "us")


async def main(levels: tuple[int, ...], profile: Path | None,
               turn_log_only: bool = False, emulator: str = "process") -> None:
    with tempfile.TemporaryDirectory() as folder:
        async with contextlib.AsyncExitStack() as exits:
            stack = await exits.enter_async_context(EmulatedProviders(["openai"]))
            transport = await exits.enter_async_context(AiohttpTransport())
            store = await exits.enter_async_context(
                SqliteStore.open(Path(folder) / "bench.sqlite"))
            adapters, emulator_pid = dict(stack.adapters), None
            if emulator == "process":
                proc, adapters["openai"] = await exits.enter_async_context(
                    emulator_process("openai"))
                emulator_pid = proc.pid
            engine = TurnEngine(store, adapters, transport, registry=SERVER_REGISTRY)
            services = make_services(engine, {"bench-token": "bench"}, emulators=stack,
                                     config=BENCH_CONFIG)
            app = create_app(services)
            app.middlewares.insert(0, handler_clock)
            runner = web.AppRunner(app, handler_cancellation=True, access_log=None)
            await runner.setup()
            exits.push_async_callback(runner.cleanup)
            site = web.TCPSite(runner, "127.0.0.1", 0, backlog=1024)
            await site.start()
            base = f"http://127.0.0.1:{next(iter(runner.addresses))[1]}"
            tune_collector()  # as a turnstate serve process does (run_server)
            print(f"-- the provider emulator runs {EMULATOR_WHERE[emulator]}")
            if turn_log_only:
                await in_process_turn_log(engine, store, base, stack)
                return
            clients = await Clients.start(base, CLIENT_NICE)
            try:
                await compare(engine, store, clients, profile)
            finally:
                await clients.close()
            await own_work(engine, store, services)
            await in_process_turn_log(engine, store, base, stack)
            clients = await Clients.start(base)  # the load levels: at full priority
            try:
                for n in levels:
                    await level(n, clients, store, engine, emulator_pid)
            finally:
                await clients.close()


EMULATOR_WHERE = {
    "process": "in its own process (turnstate emulate): the server's figures are turnstate's",
    "inline": "in the server's process: the server's CPU figures include it"}


async def in_process_turn_log(engine: TurnEngine, store: SqliteStore, base: str,
                              stack: EmulatedProviders) -> None:
    """The turn log's figures, on the in-process emulator (the resume of a running turn
    holds it at the emulator's fault gate)."""
    adapters = dict(engine.adapters)
    engine.adapters["openai"] = stack.adapters["openai"]
    try:
        await turn_log.report(engine, store, base, stack)
    finally:
        engine.adapters.update(adapters)


async def processes_main(count: int, levels: tuple[int, ...], dsn: str,
                         pool_max: int | None = None) -> None:
    """``--processes N``: the load levels against N ``turnstate serve`` processes on one
    PostgreSQL schema (see ``_server_processes``), each with ``--pg-pool-max pool_max``
    when given."""
    extra = () if pool_max is None else ("--pg-pool-max", str(pool_max))
    async with servers(count, dsn, extra) as (procs, bases, schema):
        clients = await Clients.start(",".join(bases))
        try:
            await clients.run(count, WARMUP, CHAT_TURNS)
            for n in levels:
                before = sum(cpu_seconds(proc.pid) for proc in procs)
                result = await clients.run(n, TURNS, TURNS, check=False)
                used = sum(cpu_seconds(proc.pid) for proc in procs) - before
                report_processes(n, count, result, used, await leases_left(dsn, schema))
        finally:
            await clients.close()


def server_main(argv: list[str]) -> None:
    global CLIENT_NICE  # noqa: PLW0603  # a command-line setting, read by Clients.start
    parser = argparse.ArgumentParser(
        prog="bench_server.py", description="The reference server under load: its added "
        "cost per turn, then N concurrent SSE clients (see the module docstring).")
    parser.add_argument("levels", nargs="*", type=int, metavar="N",
                        help="concurrent clients per level (default "
                             f"{' '.join(map(str, LEVELS))})")
    parser.add_argument("--profile", type=Path, metavar="FILE",
                        help="CPU profiles of part 1's served and direct turns (FILE, "
                             "<stem>.direct<suffix>); prints where served turns spend more")
    parser.add_argument("--client-nice", type=int, default=CLIENT_NICE, metavar="N",
                        help=f"nice level of part 1's client process (default {CLIENT_NICE})")
    parser.add_argument("--turn-log", action="store_true",
                        help="only the turn-events log's figures (issue 21): a write's cost, "
                             "the log's cost per turn and per event, a resume's first event")
    parser.add_argument("--emulator", choices=("process", "inline"), default="process",
                        help="where the provider emulator runs: its own process (default; "
                             "the server's CPU is then turnstate's) or inside the server's")
    parser.add_argument("--processes", type=int, metavar="P",
                        help="instead: the load levels against P turnstate serve processes "
                             "on PostgreSQL (--db), clients spread over them")
    parser.add_argument("--db", default=DEFAULT_DSN, metavar="DSN",
                        help="PostgreSQL for --processes (default $TURNSTATE_PG_DSN or the "
                             "local server); a fresh schema, dropped at the end")
    parser.add_argument("--pg-pool-max", type=int, metavar="N",
                        help="with --processes: each serve process's PostgreSQL pool size "
                             "(turnstate serve --pg-pool-max; default: serve's, 10)")
    args = parser.parse_args(argv)
    CLIENT_NICE = args.client_nice
    levels = tuple(args.levels) or LEVELS
    if args.processes:
        asyncio.run(processes_main(args.processes, levels, args.db, args.pg_pool_max))
    else:
        asyncio.run(main(levels, args.profile, args.turn_log, args.emulator))


if __name__ == "__main__":
    if sys.argv[1:2] == ["--client"]:
        asyncio.run(client_main(sys.argv[2], int(sys.argv[3])))
    else:
        server_main(sys.argv[1:])
