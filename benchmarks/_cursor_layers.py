"""``profile_cursor.py --layers``: the thread CPU of a cursor turn, layer by layer.

One process, one fake server; per round one call of each layer in turn: the same
streamed Responses request by bare aiohttp (read and dropped), through
``AiohttpTransport.stream_batches`` (SSE decoded), through ``provider_batches`` (parsed;
what the engine's call step reads), and a whole cursor turn through ``TurnEngine`` on a
``MemoryStore`` and on an SQLite file.
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import aiohttp

from benchmarks.bench_peers import MODEL, SYSTEM, Turnstate, TurnstateCursor, fake_openai, question
from turnstate.providers import AiohttpTransport
from turnstate.providers._boundary import provider_batches
from turnstate.providers._protocol import HttpRequest
from turnstate.providers.openai_responses import OpenAIResponsesAdapter
from turnstate.storage import MemoryStore, SqliteStore

Step = Callable[[int], Awaitable[object]]


def _request(base: str, index: int) -> HttpRequest:
    body = {"model": MODEL, "instructions": SYSTEM, "input": question(index), "stream": True}
    return HttpRequest(method="POST", url=f"{base}/v1/responses",
                       headers={"Content-Type": "application/json",
                                "Authorization": "Bearer sk-bench-dummy"},
                       body=json.dumps(body).encode(), provider="openai")


def _steps(base: str, session: aiohttp.ClientSession, transport: AiohttpTransport,
           memory: TurnstateCursor, sqlite: TurnstateCursor) -> dict[str, Step]:
    adapter = OpenAIResponsesAdapter(base_url=f"{base}/v1")

    async def bare(index: int) -> None:
        request = _request(base, index)
        async with session.post(request.url, data=request.body,
                                headers=dict(request.headers)) as response:
            async for _ in response.content.iter_any():
                pass

    async def transported(index: int) -> None:
        async for _ in transport.stream_batches(_request(base, index), adapter.classify_error):
            pass

    async def parsed(index: int) -> None:
        async for _ in provider_batches(transport, adapter, _request(base, index)):
            pass

    return {"bare aiohttp request, stream read": bare,
            "+ AiohttpTransport.stream_batches (decoded)": transported,
            "+ provider_batches (parsed, response built)": parsed,
            "cursor turn, TurnEngine on MemoryStore": memory.turn,
            "cursor turn, TurnEngine on SQLite file": sqlite.turn}


async def layers(turns: int) -> None:
    os.environ["OPENAI_API_KEY"] = "sk-bench-dummy"
    with tempfile.TemporaryDirectory() as tmp:
        async with (fake_openai() as fake, aiohttp.ClientSession() as session,
                    SqliteStore.open(Path(tmp) / "turnstate.db") as store):
            transport = AiohttpTransport(session)  # bare aiohttp's session: like for like
            memory = TurnstateCursor("memory", Turnstate(MemoryStore(), transport, f"{fake}/v1"))
            sqlite = TurnstateCursor("sqlite", Turnstate(store, transport, f"{fake}/v1"))
            await memory.start()
            await sqlite.start()
            steps = _steps(fake, session, transport, memory, sqlite)
            for index in range(20):  # warm up: connections, imports
                for step in steps.values():
                    await step(index)
            cpu: dict[str, list[int]] = {name: [] for name in steps}
            for index in range(100, 100 + turns):
                for name, step in steps.items():
                    began = time.thread_time_ns()
                    await step(index)
                    cpu[name].append(time.thread_time_ns() - began)
    print(f"thread CPU per call, median of {turns} (one of each in turn)")
    below = 0.0
    for number, (name, samples) in enumerate(cpu.items()):
        median = statistics.median(samples) / 1000
        added = f"{median - below:+9.0f} us" if 0 < number < 3 else ""
        print(f"{name:<46} {median:9.0f} us {added}")
        below = median if number < 3 else below
    turn = statistics.median(cpu["cursor turn, TurnEngine on MemoryStore"]) / 1000
    print(f"{'engine + MemoryStore over provider_batches':<46} {turn - below:9.0f} us")
    on_file = statistics.median(cpu["cursor turn, TurnEngine on SQLite file"]) / 1000
    print(f"{'SQLite file over MemoryStore':<46} {on_file - turn:9.0f} us")
