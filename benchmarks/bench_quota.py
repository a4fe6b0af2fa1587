"""What a storage quota costs a turn's begin and commit (attack6, money10).

Medians of the thread CPU time of ``begin_turn`` + ``commit_turn`` of a cursor turn
through ``SqliteStore`` (a WAL file, inline writes: they run on the calling thread),
without a quota and with one set (far above what is stored, so nothing is refused),
turn by turn interleaved on two files so both see the same machine.

Run: ``python benchmarks/bench_quota.py [--rounds 4] [--turns 400]``.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.storage.support import commit, start
from turnstate.storage import SqliteStore

WARMUP = 40


async def _turn(store: SqliteStore, chat_id: str, label: str) -> int:
    turn, record = start(label), commit(f"resp_{label}")
    began = time.thread_time_ns()  # the inline writes run on this thread
    lease = await store.begin_turn(chat_id, turn)
    await store.commit_turn(lease, record)
    return time.thread_time_ns() - began


async def main(rounds: int, turns: int) -> None:
    figures: dict[str, list[float]] = {"no quota": [], "quota": []}
    with tempfile.TemporaryDirectory() as directory:
        for number in range(rounds):
            async with SqliteStore.open(Path(directory) / f"plain-{number}.db") as plain, \
                    SqliteStore.open(Path(directory) / f"quota-{number}.db") as quota:
                await quota.set_storage_quota(10**15)
                stores = {"no quota": plain, "quota": quota}
                chats = {mode: (await store.create_chat(owner="bench")).id
                         for mode, store in stores.items()}
                samples: dict[str, list[int]] = {mode: [] for mode in stores}
                for index in range(turns):  # interleaved: both see the same machine
                    for mode, store in stores.items():
                        samples[mode].append(await _turn(store, chats[mode], f"{index}"))
                for mode, values in samples.items():
                    figures[mode].append(statistics.median(values[WARMUP:]) / 1000)
    for mode, values in figures.items():
        print(f"sqlite begin+commit CPU, {mode}: " + " / ".join(f"{v:.1f}" for v in values)
              + f" us (median of rounds {statistics.median(values):.1f})")
    extra = statistics.median(figures["quota"]) - statistics.median(figures["no quota"])
    print(f"quota's cost: +{extra:.1f} us "
          f"({100 * extra / statistics.median(figures['no quota']):+.0f}%)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--turns", type=int, default=400)
    args = parser.parse_args()
    asyncio.run(main(args.rounds, args.turns))
