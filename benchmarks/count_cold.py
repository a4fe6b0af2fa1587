"""Instructions and cache misses per cursor turn after a cache sweep, counted by callgrind.

``bench_peers.py`` judges turnstate's cursor turn interleaved with other clients, so each
turn starts with caches another client has just filled: the misses of a turn's working
set cost as much as its instructions. This counts both, deterministically: turnstate's
cursor turn (as in ``count_peers.py``: ``TurnEngine`` on an SQLite file, ``d``, and on a
``MemoryStore``, ``m``; the fake server is a child process, untraced) runs under
``valgrind --tool=callgrind --cache-sim=yes``, and before each measured turn a sweep
reads an 8 MB buffer (``binascii.crc32``), four times the simulated LL, evicting it.
Collection is toggled off inside ``binascii_crc32`` (``--toggle-collect``, with
``--collect-atstart=yes`` after it: a toggle turns collection off at start, and the
options are read in order; the cache simulation goes on), so the sweep's own events
are not counted, only what it leaves behind (checked: a run that counted them fails).
Each client runs twice, ``FEW`` and ``MANY`` measured turns after the same warm-up; the difference
over ``MANY - FEW`` is one turn, imports and start-up excluded. ``--warm`` drops the
sweep (the same turn with caches as the previous turn left them).

The caches are fixed, not the host's (which valgrind may not model; this machine
reports a 480 MiB L3): I1 and D1 32 KiB 8-way, LL 2 MiB 16-way, 64-byte lines, about
one core's L2 on a current x86, which is what a 16 MB copy by a neighbour evicts
(``bench_peers``' cold-cache regime).
With ``PYTHONHASHSEED=0`` two runs of one tree agree closely.

Prints per turn: instructions (Ir), I1 misses (I1mr), D1 misses (D1mr + D1mw), LL misses
(ILmr + DLmr + DLmw), then the shared objects and the functions with the most LL misses
(self cost: a function's own instructions, not its callees'). Python code shows as the
interpreter's C functions; the shared object says whose C it is (``_json``, libsqlite3).

Needs valgrind and the ``bench`` extra. Run: ``python benchmarks/count_cold.py
[--clients d,m] [--warm] [--top N]`` (minutes).
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
from collections import Counter
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

WARMUP = 20
FEW, MANY = 5, 25
SWEEP_BYTES = 8 << 20
CACHES = ("--I1=32768,8,64", "--D1=32768,8,64", "--LL=2097152,16,64")
CLIENTS = {"d": "(d) turnstate TurnEngine, SQLite file, cursor", "m": "(d) on a MemoryStore"}
COLUMNS = {"Ir": ("Ir",), "I1 miss": ("I1mr",), "D1 miss": ("D1mr", "D1mw"),
           "LL miss": ("ILmr", "DLmr", "DLmw")}
_NAMED = re.compile(r"^\((\d+)\)(?: (.*))?$")
Key = tuple[str, str]  # (shared object, function)
Counts = tuple[list[str], dict[Key, list[int]]]


async def _inner(client: str, turns: int, sweep: bool) -> None:
    """The measured process: warm up, then ``turns`` swept turns of ``client``."""
    import binascii

    from benchmarks.bench_peers import Turnstate, TurnstateCursor, fake_openai
    from turnstate.providers import AiohttpTransport
    from turnstate.storage import MemoryStore, SqliteStore

    os.environ["OPENAI_API_KEY"] = "sk-bench-dummy"
    buffer = bytes(range(256)) * (SWEEP_BYTES // 256)
    with tempfile.TemporaryDirectory() as tmp:
        async with (fake_openai() as fake, AiohttpTransport() as transport,
                    SqliteStore.open(Path(tmp) / "turnstate.db") as store):
            chosen = store if client == "d" else MemoryStore()
            cursor = TurnstateCursor(client, Turnstate(chosen, transport, f"{fake}/v1"))
            await cursor.start()
            for index in range(1, 1 + WARMUP):
                await cursor.turn(index)
            for index in range(100, 100 + turns):
                if sweep:
                    binascii.crc32(buffer)
                await cursor.turn(index)


def parse_callgrind(lines: Iterable[str]) -> Counts:
    """A callgrind output's event names and each function's self cost.

    Handles name compression (``fn=(3) name`` defines, ``fn=(3)`` refers), relative
    positions (``+2``, ``-1``, ``*``) and call costs (the line after ``calls=`` is the
    callee's inclusive cost, not the caller's own, so it is skipped).
    """
    events: list[str] = []
    costs: dict[Key, list[int]] = {}
    names: dict[tuple[str, str], str] = {}
    where = {"ob": "", "fn": ""}
    call_line = False
    positions = 1  # ``positions: line``; ``instr line`` with --dump-instr
    for line in lines:
        if line[:1].isdigit() or line[:1] in "+-*":
            if not call_line:
                row = costs.setdefault((where["ob"], where["fn"]), [0] * len(events))
                for slot, value in enumerate(line.split()[positions:]):
                    row[slot] += int(value)
            call_line = False
            continue
        key, equals, value = line.rstrip("\n").partition("=")
        if key.startswith("events:"):
            events = key.split(":", 1)[1].split()
        elif key.startswith("positions:"):
            positions = len(key.split(":", 1)[1].split())
        elif equals and key == "calls":
            call_line = True
        elif equals and key in _SPACES:
            value = _resolve(names, _SPACES[key], value)
            if key in where:
                where[key] = value
    return events, costs


_SPACES = {"ob": "ob", "cob": "ob", "fn": "fn", "cfn": "fn",
           **dict.fromkeys(("fl", "fi", "fe", "cfi", "cfl"), "fl")}
"""The name spaces of callgrind's compressed names: objects, functions, files."""


def _resolve(names: dict[tuple[str, str], str], space: str, value: str) -> str:
    """A compressed name: ``(id) name`` defines ``id``, ``(id)`` alone refers to it."""
    named = _NAMED.match(value)
    if named is None:
        return value
    if named.group(2) is not None:
        names[space, named.group(1)] = named.group(2)
    return names.get((space, named.group(1)), value)


def _count(client: str, turns: int, sweep: bool, folder: Path) -> Counts:
    out = folder / f"callgrind.{client}.{turns}"
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    command = ["valgrind", "--tool=callgrind", "--cache-sim=yes", *CACHES,
               "--toggle-collect=binascii_crc32", "--collect-atstart=yes",
               f"--callgrind-out-file={out}",
               sys.executable, __file__, "--inner", client, str(turns),
               "sweep" if sweep else "warm"]
    subprocess.run(command, check=True, env=env, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    with out.open() as lines:
        events, costs = parse_callgrind(lines)
    if any(function == "binascii_crc32" and row[0] for (_, function), row in costs.items()):
        msg = f"the sweep was counted in {out}: valgrind took --toggle-collect otherwise"
        raise RuntimeError(msg)
    return events, costs


def _per_turn(few: dict[Key, list[int]], many: dict[Key, list[int]],
              width: int) -> dict[Key, list[float]]:
    empty = [0] * width
    return {key: [(m - f) / (MANY - FEW) for m, f in zip(row, few.get(key, empty), strict=True)]
            for key, row in many.items()}


def _columns(events: list[str], row: list[float]) -> list[float]:
    return [sum(row[events.index(name)] for name in names if name in events)
            for names in COLUMNS.values()]


def report(client: str, events: list[str], turn: dict[Key, list[float]], top: int) -> None:
    """Print one client's per-turn totals, shared objects and functions."""
    total = [sum(row[slot] for row in turn.values()) for slot in range(len(events))]
    header = "".join(f"{name:>13}" for name in COLUMNS)
    print(f"\n{CLIENTS[client]}: per turn\n{'':<56}{header}")
    print(f"{'total':<56}" + "".join(f"{v:>13,.0f}" for v in _columns(events, total)))
    ll = COLUMNS["LL miss"]
    by_object: Counter[str] = Counter()
    rows_by_object: dict[str, list[float]] = {}
    for (obj, _), row in turn.items():
        name = Path(obj).name
        acc = rows_by_object.setdefault(name, [0.0] * len(events))
        for slot, value in enumerate(row):
            acc[slot] += value
    for name, row in rows_by_object.items():
        by_object[name] = sum(row[events.index(e)] for e in ll if e in events)
    print("shared objects by LL misses")
    for name, _ in by_object.most_common(top):
        values = _columns(events, rows_by_object[name])
        print(f"  {name[:54]:<54}" + "".join(f"{v:>13,.0f}" for v in values))
    print("functions by LL misses (self)")
    ranked = sorted(turn.items(), key=lambda item: -_columns(events, item[1])[3])
    for (obj, function), row in ranked[:top]:
        label = f"{function} ({Path(obj).name})"
        print(f"  {label[:54]:<54}" + "".join(f"{v:>13,.0f}" for v in _columns(events, row)))


def main(clients: list[str], sweep: bool, top: int) -> None:
    if shutil.which("valgrind") is None:
        sys.exit("count_cold: valgrind is not installed (apt-get install valgrind)")
    runs = [(client, turns) for client in clients for turns in (FEW, MANY)]
    with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(2) as pool:
        results = dict(zip(runs, pool.map(lambda run: _count(*run, sweep, Path(tmp)), runs),
                           strict=True))
    print(f"callgrind --cache-sim=yes {' '.join(CACHES)}, ({MANY} - {FEW} turns) / "
          f"{MANY - FEW}, PYTHONHASHSEED=0, every thread of the client process, "
          + (f"a {SWEEP_BYTES >> 20} MB sweep (uncounted) before each turn" if sweep
             else "no sweep (--warm)"))
    for client in clients:
        events, few = results[client, FEW]
        _, many = results[client, MANY]
        report(client, events, _per_turn(few, many, len(events)), top)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", default="d,m",
                        help="comma-separated: d (SQLite file), m (MemoryStore)")
    parser.add_argument("--warm", action="store_true", help="no cache sweep before a turn")
    parser.add_argument("--top", type=int, default=12, help="objects and functions listed")
    parser.add_argument("--inner", nargs=3, metavar=("CLIENT", "TURNS", "MODE"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.inner:
        asyncio.run(_inner(args.inner[0], int(args.inner[1]), args.inner[2] == "sweep"))
    else:
        main([client for client in args.clients.split(",") if client], not args.warm, args.top)
