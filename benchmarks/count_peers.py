"""Instructions per cursor turn, counted by valgrind: turnstate against the raw client.

``bench_peers.py`` times the cursor clients on a shared machine, where a turn's CPU
time moves with the load and with what ran just before it (a client after a heavy one
inherits its cache misses). This counts instead: each client runs alone in its own
process under ``valgrind --tool=callgrind`` (the fake server is a child process and
runs natively), twice, with ``FEW`` and ``MANY`` measured turns after the same warm-up,
so the difference divided by ``MANY - FEW`` is the instructions of one turn, imports
and start-up excluded. Every thread of the client process counts (the SQLite store's
worker too). With ``PYTHONHASHSEED=0`` two runs of one tree agree within about 0.1 %,
whatever else the machine does, so a ratio here moves only when the code does.
Instructions are not time (a cache miss costs many): read these beside
``bench_peers.py``'s CPU, not instead of it.

Clients (as in ``bench_peers.py``): (a) the raw ``openai`` client, (b) the Agents SDK's
``Runner.run``, (d) turnstate's ``TurnEngine`` on an SQLite file, and the same on a
``MemoryStore``.

Needs valgrind and the ``bench`` extra. Run: ``python benchmarks/count_peers.py``
(minutes: each client runs twice under valgrind, imports included; ``--clients d,m``
for turnstate alone).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

WARMUP = 20
FEW, MANY = 10, 60
CLIENTS = {
    "a": "(a) openai client, previous_response_id",
    "b": "(b) Agents SDK Runner.run, previous_response_id",
    "d": "(d) turnstate TurnEngine, SQLite file, cursor",
    "m": "(d) on a MemoryStore instead",
}
_TOTALS = re.compile(r"^(?:summary|totals):\s+(\d+)", re.MULTILINE)


async def _inner(client: str, turns: int) -> None:
    """The measured process: warm up, then ``turns`` turns of ``client``, then exit."""
    from benchmarks.bench_peers import AgentsRun, RawOpenAI, Turnstate, TurnstateCursor, fake_openai
    from turnstate.providers import AiohttpTransport
    from turnstate.storage import MemoryStore, SqliteStore

    os.environ["OPENAI_API_KEY"] = "sk-bench-dummy"
    with tempfile.TemporaryDirectory() as tmp:
        async with (fake_openai() as fake, AiohttpTransport() as transport,
                    SqliteStore.open(Path(tmp) / "turnstate.db") as store):
            step: Callable[[int], Awaitable[None]]
            if client in "dm":
                chosen = store if client == "d" else MemoryStore()
                cursor = TurnstateCursor(client, Turnstate(chosen, transport, f"{fake}/v1"))
                await cursor.start()
                step = cursor.turn
            else:
                step = (RawOpenAI(fake) if client == "a" else AgentsRun(fake)).turn
            for index in range(1, 1 + WARMUP):
                await step(index)
            for index in range(100, 100 + turns):
                await step(index)


def _count(client: str, turns: int, folder: Path) -> int:
    out = folder / f"callgrind.{client}.{turns}"
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    command = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
               sys.executable, __file__, "--inner", client, str(turns)]
    subprocess.run(command, check=True, env=env, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    found = _TOTALS.search(out.read_text())
    if found is None:
        msg = f"no instruction total in {out}"
        raise RuntimeError(msg)
    return int(found.group(1))


def main(clients: list[str]) -> None:
    if shutil.which("valgrind") is None:
        sys.exit("count_peers: valgrind is not installed (apt-get install valgrind)")
    runs = [(client, turns) for client in clients for turns in (FEW, MANY)]
    with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(2) as pool:
        totals = dict(zip(runs, pool.map(lambda run: _count(*run, Path(tmp)), runs),
                          strict=True))
    per_turn = {client: (totals[client, MANY] - totals[client, FEW]) / (MANY - FEW)
                for client in clients}
    print(f"instructions per cursor turn, callgrind, ({MANY} - {FEW} turns) / {MANY - FEW}, "
          "PYTHONHASHSEED=0, every thread of the client process")
    for client in clients:
        print(f"{CLIENTS[client]:<52} {per_turn[client]:>14,.0f}")
    for mine, theirs, name in (("d", "a", "(d) / (a) turnstate cursor / raw openai client"),
                               ("d", "b", "(d) / (b) turnstate cursor / Agents SDK Runner.run"),
                               ("m", "a", "MemoryStore (d) / (a)")):
        if mine in per_turn and theirs in per_turn:
            print(f"{name:<52} {per_turn[mine] / per_turn[theirs]:>13.2f}x")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", default="a,b,d,m",
                        help="comma-separated: a (raw openai), b (Agents SDK), d (turnstate, "
                             "SQLite file), m (turnstate, MemoryStore)")
    parser.add_argument("--inner", nargs=2, metavar=("CLIENT", "TURNS"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.inner:
        asyncio.run(_inner(args.inner[0], int(args.inner[1])))
    else:
        main([client for client in args.clients.split(",") if client])
