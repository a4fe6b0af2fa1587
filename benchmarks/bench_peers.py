"""turnstate against its peer, the OpenAI Agents SDK, on one local fake OpenAI server.

Every client talks to the same small fake server (``_fake_openai.py``, a child process
this benchmark starts; not turnstate's emulator, so neither side gets a home
advantage; every reply costs it about the same, streamed or not), over loopback, in one
run, interleaved turn by turn: every client runs one turn, then every client again, in
an order that changes every time (``balanced_orders``: A B E C D, then B C A D E, ...),
so a drift in the machine's load hits every client alike and each client runs right
after each other client about equally often (a client inherits its predecessor's cache
misses: about 0.5 ms of a 3-4 ms turn after a heavy one).

Cursor clients (each chains on the previous response):
  (a) the raw ``openai`` client, ``responses.create`` with ``previous_response_id``
      (no streaming, nothing persisted);
  (b) the Agents SDK, ``Runner.run`` with ``previous_response_id`` (nothing persisted);
  (c) the Agents SDK, ``Runner.run_streamed`` (events consumed);
  (d) turnstate ``TurnEngine`` on an SQLite file, continuing by cursor (streamed,
      every turn committed, ``AiohttpTransport()`` with its own session), and (d')
      the same against turnstate's own OpenAI emulator.
Replay clients, at 50, 100 and 200 turns of history (fresh seeded chats each round):
  (e) the Agents SDK with an ``SQLiteSession`` file (the whole session every turn);
  (f) turnstate replaying the committed history: Chat Completions (a stateless
      provider, always replays) and OpenAI Responses with the cursor cleared before each
      turn (a forced replay; the clearing is not timed).

Every client gets untimed warm-up turns first (imports, connections, a first cursor, a
first replay). Printed per client: the median wall time per turn over every measured
turn, the min and max of the per-round medians, the client process's CPU time per turn
(the fake server's CPU is in its own process and never counted), the collector's time
per turn inside the client's timed turns (a collection is charged to the turn whose
allocation set it off), request bytes per turn as the server received them (a few
untimed turns at the end), and the ratios turnstate / peer,
wall and client CPU side by side (CPU is inflated when other processes share the cores;
the ratio of two clients measured in the same rounds holds much steadier).
``OPENAI_API_KEY`` is set to a dummy value and the Agents SDK's tracing export is
disabled: nothing leaves loopback.

Needs the ``bench`` extra: ``pip install -e '.[dev,bench]'``.
``--blocks`` runs each client's turns of a round back to back instead (the clients in the
round's balanced order): every turn but a block's first follows the same client's, so
caches are warm, as in a process that runs only that client; set beside the default run,
it shows what share of a ratio is the neighbours' cache misses.

Run: ``python benchmarks/bench_peers.py [--rounds N] [--blocks]``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import agents
import aiohttp
import openai

from benchmarks._fake_openai import ANSWER
from turnstate.core import TextPart, Usage
from turnstate.engine import TurnEngine, TurnInput
from turnstate.providers import AiohttpTransport
from turnstate.providers.chat_completions import ChatCompletionsAdapter
from turnstate.providers.openai_responses import OpenAIResponsesAdapter
from turnstate.storage import SqliteStore, TurnCommit, TurnStart

ROOT = Path(__file__).resolve().parent.parent
SYSTEM = ("You are the assistant of a travel desk. Answer in two or three short sentences, "
          "name one concrete place, and never invent prices.")
MODEL = "gpt-4o"
BLOCK = 20  # cursor turns per client per round
REPLAY_LENGTHS = (50, 100, 200)
REPLAY_TURNS = 4  # timed turns per seeded chat per round

agents.set_tracing_disabled(True)


def question(index: int) -> str:
    return (f"Turn {index}: what is worth seeing near the old harbour if it rains in the "
            "afternoon, and how long should I plan for it?")


# --- the servers (child processes) ---------------------------------------------------


@contextlib.asynccontextmanager
async def child_server(args: list[str], marker: str) -> AsyncIterator[str]:
    """Start a server process; yield the base URL it prints, stop it at exit."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, *args, stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE, env=env, cwd=ROOT)
    assert proc.stdout is not None and proc.stdin is not None
    try:
        line = (await asyncio.wait_for(proc.stdout.readline(), 30)).decode()
        if marker not in line:
            msg = f"server did not start: {line!r}"
            raise RuntimeError(msg)
        yield line
    finally:
        proc.stdin.close()
        with contextlib.suppress(ProcessLookupError):
            proc.terminate()
        await proc.wait()


@contextlib.asynccontextmanager
async def fake_openai() -> AsyncIterator[str]:
    async with child_server([str(ROOT / "benchmarks" / "_fake_openai.py")], "PORT") as line:
        yield f"http://127.0.0.1:{int(line.split()[1])}"


@contextlib.asynccontextmanager
async def turnstate_emulator() -> AsyncIterator[str]:
    args = ["-m", "turnstate.cli", "emulate", "openai", "--port", "0"]
    async with child_server(args, "listening on") as line:
        yield line.split("listening on ", 1)[1].split()[0]  # .../v1


class ByteCounter:
    """Request bytes as the fake server counted them (its ``/stats``)."""

    def __init__(self, session: aiohttp.ClientSession, root: str | None) -> None:
        self.session, self.root = session, root

    async def read(self) -> int | None:
        if self.root is None:
            return None
        async with self.session.get(f"{self.root}/stats") as reply:
            return int((await reply.json())["bytes"])


# --- the clients ---------------------------------------------------------------------


class RawOpenAI:
    name = "(a) openai client, previous_response_id"

    def __init__(self, base: str) -> None:
        self.client = openai.AsyncOpenAI(base_url=f"{base}/v1", max_retries=0)
        self.previous: str | None = None

    async def turn(self, index: int) -> None:
        response = await self.client.responses.create(
            model=MODEL, instructions=SYSTEM, input=question(index),
            previous_response_id=self.previous)
        self.previous = response.id


class AgentsRun:
    name = "(b) Agents SDK Runner.run, previous_response_id"

    def __init__(self, base: str) -> None:
        client = openai.AsyncOpenAI(base_url=f"{base}/v1", max_retries=0)
        model = agents.OpenAIResponsesModel(model=MODEL, openai_client=client)
        self.agent = agents.Agent(name="bench", instructions=SYSTEM, model=model)
        self.previous: str | None = None

    async def turn(self, index: int) -> None:
        result = await agents.Runner.run(self.agent, question(index),
                                         previous_response_id=self.previous)
        self.previous = result.last_response_id


class AgentsStreamed(AgentsRun):
    name = "(c) Agents SDK Runner.run_streamed"

    async def turn(self, index: int) -> None:
        result = agents.Runner.run_streamed(self.agent, question(index),
                                            previous_response_id=self.previous)
        async for _ in result.stream_events():
            pass
        self.previous = result.last_response_id


class Turnstate:
    """A TurnEngine on an SQLite file, talking OpenAI Responses and Chat Completions
    through the process's one ``AiohttpTransport()`` (its own session: the README's
    setup, as the peers run on their clients' defaults)."""

    def __init__(self, store: SqliteStore, transport: AiohttpTransport,
                 api_root: str) -> None:
        self.store = store
        self.engine = TurnEngine(store, {
            "openai": OpenAIResponsesAdapter(base_url=api_root),
            "openai-compatible": ChatCompletionsAdapter(base_url=api_root),
        }, transport)
        self.chat_id = ""

    async def new_chat(self, seeded_turns: int = 0) -> None:
        self.chat_id = (await self.store.create_chat(owner="bench")).id
        for index in range(seeded_turns):
            lease = await self.store.begin_turn(self.chat_id, TurnStart(
                turn_id=uuid.uuid4().hex, user_parts=(TextPart(text=question(index)),),
                provider="openai", model=MODEL))
            await self.store.commit_turn(lease, TurnCommit(
                parts=(TextPart(text=ANSWER),), provider_state=None, audit=None,
                usage=Usage(input_tokens=10, output_tokens=30), context=None,
                strategy="replay", path=()))

    async def run(self, index: int, provider: str) -> str:
        turn = TurnInput(provider=provider, model=MODEL, system_prompt=SYSTEM,
                         user_text=question(index))
        strategy = ""
        async for event in self.engine.run_turn(self.chat_id, turn):
            if event.type == "turn_completed":
                strategy = event.strategy
            elif event.type == "turn_aborted":
                msg = f"turn aborted: {event.reason} {event.detail}"
                raise RuntimeError(msg)
        return strategy


class TurnstateCursor:
    def __init__(self, name: str, turnstate: Turnstate) -> None:
        self.name, self.ts = name, turnstate

    async def start(self) -> None:
        await self.ts.new_chat()
        await self.ts.run(0, "openai")  # the first turn replays and stores a cursor

    async def turn(self, index: int) -> None:
        if await self.ts.run(index, "openai") != "cursor":
            msg = "turnstate did not continue by cursor"
            raise RuntimeError(msg)


# --- measuring -----------------------------------------------------------------------


class Samples:
    def __init__(self, name: str) -> None:
        self.name = name
        self.wall: list[float] = []
        self.cpu: list[float] = []
        self.collector: list[float] = []
        self.round_medians: list[float] = []
        self.bytes: list[float] = []
        self._round: list[float] = []

    def add(self, wall: float, cpu: float, collector: float) -> None:
        self.wall.append(wall)
        self.cpu.append(cpu)
        self.collector.append(collector)
        self._round.append(wall)

    def end_round(self) -> None:
        if self._round:
            self.round_medians.append(statistics.median(self._round))
        self._round = []

    def row(self) -> str:
        wall = statistics.median(self.wall)
        cpu = statistics.median(self.cpu)
        sent = f"{statistics.median(self.bytes):>9,.0f}" if self.bytes else f"{'-':>9}"
        collector = statistics.mean(self.collector)
        return (f"{self.name:<52} {wall:>7.2f} {min(self.round_medians):>7.2f} "
                f"{max(self.round_medians):>7.2f} {cpu:>7.2f} {collector:>7.3f} {sent}")

    @property
    def median(self) -> float:
        return statistics.median(self.wall)

    @property
    def cpu_median(self) -> float:
        return statistics.median(self.cpu)


HEADER = (f"{'client':<52} {'median':>7} {'min':>7} {'max':>7} {'CPU':>7} {'GC':>7} "
          f"{'bytes':>9}\n"
          f"{'':<52} {'ms/turn':>7} {'round':>7} {'round':>7} {'ms/turn':>7} {'ms/turn':>7} "
          f"{'/turn':>9}")
RATIO_HEADER = f"{'ratio (medians)':<60} {'wall':>7} {'CPU':>7}"


def print_ratio(name: str, value: Samples, base: Samples, target: str = "") -> None:
    """Wall and client-CPU ratios of two clients measured in the same rounds."""
    tail = f"   (target {target})" if target else ""
    print(f"{name:<60} {value.median / base.median:>6.2f}x "
          f"{value.cpu_median / base.cpu_median:>6.2f}x{tail}")


def balanced_orders(count: int) -> list[list[int]]:
    """Orders of ``count`` clients (a Williams design) in which each client runs right
    after each other client equally often: twice in the ``2 * count`` orders of an odd
    count, once in the ``count`` orders of an even one (and once more in some of the
    joins between orders). Each order is a round of every client once. Rotating one
    order instead (A B C D, B C D A, ...) has each client follow the same neighbour in
    all but one order of each cycle."""
    first, low, high = [0], 1, count - 1
    for position in range(1, count):
        if position % 2:
            first.append(low)
            low += 1
        else:
            first.append(high)
            high -= 1
    orders = [[(client + shift) % count for client in first] for shift in range(count)]
    if count % 2:
        orders += [order[::-1] for order in orders]
    return orders


def ordered(items: list[Any], turn: int) -> list[Any]:
    """``items`` in the ``turn``-th of their balanced orders (cycling)."""
    orders = balanced_orders(len(items))
    return [items[i] for i in orders[turn % len(orders)]]


class Collector:
    """The garbage collector's time, summed, from ``gc.callbacks``."""

    def __init__(self) -> None:
        self.total_ns = self._since = 0

    def __call__(self, phase: str, _: dict[str, int]) -> None:
        if phase == "start":
            self._since = time.perf_counter_ns()
        else:
            self.total_ns += time.perf_counter_ns() - self._since


COLLECTOR = Collector()


async def timed(samples: Samples, step: Callable[[int], Awaitable[object]], index: int) -> None:
    """One timed call of ``step``: wall, this process's CPU (the fake server's CPU is in
    its own process and never counted) and the collector's time within it."""
    collector = COLLECTOR.total_ns
    wall, cpu = time.perf_counter(), time.process_time()
    await step(index)
    samples.add((time.perf_counter() - wall) * 1000, (time.process_time() - cpu) * 1000,
                (COLLECTOR.total_ns - collector) / 1e6)


async def count_bytes(samples: Samples, step: Callable[[int], Awaitable[object]],
                      counter: ByteCounter, first: int, turns: int = 3) -> None:
    """Request bytes per turn as the fake server received them (untimed turns)."""
    before = await counter.read()
    for index in range(first, first + turns):
        await step(index)
    after = await counter.read()
    if before is not None and after is not None:
        samples.bytes.append((after - before) / turns)


def cursor_schedule(clients: list[Any], round_number: int, *,
                    blocks: bool) -> list[tuple[Any, int]]:
    """One round's turns, ``BLOCK`` of each client, in the order they run, each with its
    question's index (the same questions for every client): one turn each in turn, in
    balanced orders (so load drift within a round hits every client
    alike, and no neighbour dominates); with ``blocks``, each client's turns back to back,
    the clients in the round's balanced order (each turn but the first of a block
    follows the same client's: warm caches, the figure a process running only that
    client would see; drift is then balanced across rounds only)."""
    first = 10 + round_number * BLOCK  # the warm-up turns used 1 to 5
    if blocks:
        return [(client, index) for client in ordered(clients, round_number)
                for index in range(first, first + BLOCK)]
    return [(client, index) for index in range(first, first + BLOCK)
            for client in ordered(clients, index)]


async def cursor_section(rounds: int, fake: str, emulator: str, store: SqliteStore, *,
                         session: aiohttp.ClientSession, transport: AiohttpTransport,
                         blocks: bool = False) -> dict[str, Samples]:
    """Each round: ``BLOCK`` turns per client, as ``cursor_schedule`` orders them."""
    counter = ByteCounter(session, fake)
    clients: list[Any] = [
        RawOpenAI(fake), AgentsRun(fake), AgentsStreamed(fake),
        TurnstateCursor("(d) turnstate TurnEngine, SQLite file, cursor",
                        Turnstate(store, transport, f"{fake}/v1")),
        TurnstateCursor("(d') same, against turnstate's own emulator",
                        Turnstate(store, transport, emulator)),
    ]
    samples = {client.name: Samples(client.name) for client in clients}
    for client in clients:  # warm up: imports, connections, first cursor
        if isinstance(client, TurnstateCursor):
            await client.start()
        for index in range(1, 6):
            await client.turn(index)
    for done in range(rounds):
        for client, index in cursor_schedule(clients, done, blocks=blocks):
            await timed(samples[client.name], client.turn, index)
        for row in samples.values():
            row.end_round()
    index = 10 + rounds * BLOCK
    for client in clients[:4]:  # (d') talks to the emulator, which counts nothing
        await count_bytes(samples[client.name], client.turn, counter, index)
    return samples


def seed_items(turns: int) -> list[Any]:
    """An Agents SDK session's items after ``turns`` turns (the shape it stores itself)."""
    items: list[Any] = []
    for index in range(turns):
        items.append({"role": "user", "content": question(index)})
        items.append({"id": f"msg_seed{index:08d}", "type": "message", "role": "assistant",
                      "status": "completed", "content": [
                          {"type": "output_text", "text": ANSWER, "annotations": [],
                           "logprobs": []}]})
    return items


REPLAY_NAMES = ("(e) Agents SDK Runner.run, SQLiteSession file",
                "(f) turnstate replay, Chat Completions",
                "(f) turnstate replay, OpenAI Responses (forced)")


class ReplayClients:
    """The three replay clients on chats seeded with ``length`` turns of history."""

    def __init__(self, fake: str, store: SqliteStore, transport: AiohttpTransport,
                 folder: Path) -> None:
        client = openai.AsyncOpenAI(base_url=f"{fake}/v1", max_retries=0)
        self.agent = agents.Agent(name="bench", instructions=SYSTEM, model=agents.
                                  OpenAIResponsesModel(model=MODEL, openai_client=client))
        self.store, self.folder = store, folder
        self.chat = Turnstate(store, transport, f"{fake}/v1")
        self.responses = Turnstate(store, transport, f"{fake}/v1")
        self.sdk_session: agents.SQLiteSession | None = None

    async def seed(self, length: int) -> None:
        if self.sdk_session is not None:
            self.sdk_session.close()
        self.sdk_session = agents.SQLiteSession(uuid.uuid4().hex,
                                                db_path=self.folder / "agents.db")
        await self.sdk_session.add_items(seed_items(length))
        await self.chat.new_chat(length)
        await self.responses.new_chat(length)

    def steps(self) -> dict[str, Callable[[int], Awaitable[object]]]:
        session = self.sdk_session

        async def sdk(index: int) -> None:
            await agents.Runner.run(self.agent, question(index), session=session)

        async def chat(index: int) -> None:
            await self.chat.run(index, "openai-compatible")

        async def responses(index: int) -> None:
            await self.responses.run(index, "openai")

        return dict(zip(REPLAY_NAMES, (sdk, chat, responses), strict=True))

    async def clear(self) -> None:
        """Before each forced replay (untimed): the Responses chat's cursor cleared."""
        await self.store.clear_provider_state(self.responses.chat_id,
                                              reason="bench: forced replay")


async def replay_section(rounds: int, fake: str, store: SqliteStore, *,
                         session: aiohttp.ClientSession, transport: AiohttpTransport,
                         folder: Path) -> dict[tuple[str, int], Samples]:
    """Each round and history length: fresh seeded chats, then ``REPLAY_TURNS`` turns
    per client, one each in turn, in balanced orders (each length takes its orders in
    sequence, round after round). First an untimed turn per client (the cursor section
    warmed none of the replay paths: the session, Chat Completions, a replay)."""
    clients = ReplayClients(fake, store, transport, folder)
    counter = ByteCounter(session, fake)
    samples = {(name, length): Samples(f"{name} @{length}")
               for name in REPLAY_NAMES for length in REPLAY_LENGTHS}
    await clients.seed(REPLAY_LENGTHS[0])
    for name, step in clients.steps().items():  # warm up (untimed)
        if name == REPLAY_NAMES[2]:
            await clients.clear()
        await step(REPLAY_LENGTHS[0])
    for done in range(rounds):
        for length in REPLAY_LENGTHS:
            await clients.seed(length)
            steps = clients.steps()
            for turn, index in enumerate(range(length, length + REPLAY_TURNS)):
                for name in ordered(list(REPLAY_NAMES), done * REPLAY_TURNS + turn):
                    if name == REPLAY_NAMES[2]:
                        await clients.clear()
                    await timed(samples[name, length], steps[name], index)
            for name in REPLAY_NAMES:
                samples[name, length].end_round()
    for length in REPLAY_LENGTHS:  # request bytes, on fresh chats of each length
        await clients.seed(length)
        for name, step in clients.steps().items():
            if name == REPLAY_NAMES[2]:
                await clients.clear()
            await count_bytes(samples[name, length], step, counter, length, turns=1)
    return samples


def report_cursor(samples: dict[str, Samples]) -> None:
    a, b, c, d, emulated = samples.values()
    print(HEADER)
    for row in samples.values():
        print(row.row())
    print(RATIO_HEADER)
    print_ratio("(d) / (a) turnstate cursor / raw openai client", d, a,
                "wall <= 1.3, CPU <= 0.5")
    print_ratio("(d) / (b) turnstate cursor / Agents SDK Runner.run", d, b,
                "wall <= 0.4, CPU <= 0.25")
    print_ratio("(d) / (c) turnstate cursor / Agents SDK run_streamed", d, c)
    print_ratio("(d') / (d) turnstate's emulator / the fake server", emulated, d)
    print(f"{'(d) client-process CPU per cursor turn (median)':<60} "
          f"{d.cpu_median:>6.2f} ms   (target <= 1 ms)")


SHORT = {"(e)": "Agents SDK session", "(f) turnstate replay, Chat": "turnstate CC replay",
         "(f) turnstate replay, OpenAI": "turnstate Responses replay"}


def _short(name: str) -> str:
    return next(label for prefix, label in SHORT.items() if name.startswith(prefix))


def report_replay(samples: dict[tuple[str, int], Samples]) -> None:
    print(HEADER)
    for row in samples.values():
        print(row.row())
    print(RATIO_HEADER)
    names = list(dict.fromkeys(name for name, _ in samples))
    sdk = names[0]
    first, last = REPLAY_LENGTHS[0], REPLAY_LENGTHS[-1]
    for name in names[1:]:
        for length in REPLAY_LENGTHS:
            print_ratio(f"(f)/(e) {_short(name)} / {_short(sdk)} @{length}",
                        samples[name, length], samples[sdk, length],
                        "wall <= 0.05" if length == last else "")
    for name in names:
        low, high = samples[name, first].median, samples[name, last].median
        print(f"{_short(name) + f' growth @{first} -> @{last}':<60} {high - low:>6.2f} ms"
              f"   ({high / low:.2f}x for {last / first:.0f}x the history)")
    base = samples[sdk, last].median - samples[sdk, first].median
    for name in names[1:]:
        grow = samples[name, last].median - samples[name, first].median
        print(f"{_short(name) + ' growth / ' + _short(sdk) + ' growth':<60} "
              f"{grow / base:>6.2f}x")


async def main(rounds: int, blocks: bool = False) -> None:
    os.environ["OPENAI_API_KEY"] = "sk-bench-dummy"  # before any client reads it
    gc.callbacks.append(COLLECTOR)
    print("turnstate vs the OpenAI Agents SDK "
          f"(openai {openai.__version__}, openai-agents {agents.__version__}); "
          "one local fake server, loopback, interleaved rounds.")
    print("Numbers from one noisy shared 2-core machine: read the ratios, not the absolutes.")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        async with (fake_openai() as fake, turnstate_emulator() as emulator,
                    aiohttp.ClientSession() as session, AiohttpTransport() as transport,
                    SqliteStore.open(folder / "turnstate.db") as store):
            shape = "each client's turns back to back" if blocks else "one turn each in turn"
            print(f"\ncursor turns: {rounds} rounds x {BLOCK} turns per client ({shape})")
            report_cursor(await cursor_section(rounds, fake, emulator, store, session=session,
                                               transport=transport, blocks=blocks))
            print(f"\nreplay turns: {rounds} rounds x {REPLAY_TURNS} turns per client and "
                  "history length (turns of history)")
            report_replay(await replay_section(rounds, fake, store, session=session,
                                               transport=transport, folder=folder))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--blocks", action="store_true",
                        help="run each client's turns of a round back to back (warm caches; "
                             "the default interleaves them turn by turn)")
    options = parser.parse_args()
    asyncio.run(main(options.rounds, options.blocks))
