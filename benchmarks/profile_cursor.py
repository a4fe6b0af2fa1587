"""Where a cursor turn's time goes: cProfile over TurnEngine cursor turns, or layers.

The same setup as ``bench_peers.py`` (d): an SQLite file store, the aiohttp transport,
the OpenAI Responses adapter, the benchmark's fake server in a child process. Prints the
functions with the most own time and the most cumulative time, per turn.

``--layers`` measures instead of profiling (cProfile's own cost per call inflates
call-heavy code several times over): the thread CPU of the same request made by bare
aiohttp, through ``AiohttpTransport.stream_batches`` (SSE decoding), through
``provider_batches`` (the parser), and of a whole cursor turn on a ``MemoryStore`` and on
an SQLite file, in one process, one of each in turn, so each layer's median minus the
one below is what that layer adds.

Run: ``python benchmarks/profile_cursor.py [--turns N] [--sort tottime|cumtime] [--layers]``.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import os
import pstats
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import aiohttp

from benchmarks._cursor_layers import layers
from benchmarks.bench_peers import Turnstate, TurnstateCursor, fake_openai
from turnstate.providers import AiohttpTransport
from turnstate.storage import SqliteStore


async def main(turns: int, sort: str, limit: int, pattern: str) -> None:
    os.environ["OPENAI_API_KEY"] = "sk-bench-dummy"
    with tempfile.TemporaryDirectory() as tmp:
        async with (fake_openai() as fake, aiohttp.ClientSession() as session,
                    SqliteStore.open(Path(tmp) / "turnstate.db") as store):
            transport = AiohttpTransport(session)
            client = TurnstateCursor("cursor", Turnstate(store, transport, f"{fake}/v1"))
            await client.start()
            for index in range(50):
                await client.turn(index)
            profile = cProfile.Profile(time.process_time)  # CPU, not waiting
            profile.enable()
            for index in range(turns):
                await client.turn(100 + index)
            profile.disable()
    stats = pstats.Stats(profile)
    print(f"{turns} cursor turns; total {stats.total_tt * 1000 / turns:.3f} ms per turn "
          "(CPU time, profiled, so slower than unprofiled)")
    stats.sort_stats(sort).print_stats(pattern, limit)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=500)
    parser.add_argument("--sort", default="tottime")
    parser.add_argument("--limit", type=int, default=40)
    parser.add_argument("--only", default="", help="a regex the listed functions match")
    parser.add_argument("--layers", action="store_true",
                        help="CPU per layer (bare aiohttp, transport, parser, turn) instead")
    args = parser.parse_args()
    if args.layers:
        asyncio.run(layers(args.turns))
    else:
        asyncio.run(main(args.turns, args.sort, args.limit, args.only))
