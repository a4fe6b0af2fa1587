"""One server node for the multi-process PostgreSQL test: its own engine and store.

Run as ``python -m tests.storage.pg_worker CONFIG_JSON``. The config names the DSN and
schema, the emulators' base URLs (the test process serves them, so a cursor made
through one node is valid on every node), this worker's number, its turns and chats.

``mode="turns"``: run the turns in rounds with the other workers, all on one chat per
round (so they collide; ``run_turns``), and print one JSON report line per turn:
``committed`` (with the turn's provider request count and the monotonic times of its
first and its last event before the commit), ``busy`` (``ChatBusy``, with the number of
events seen: zero) or anything else that happened.

``mode="victim"``: begin one turn with a short lease whose tool never returns, print
``READY <turn id>`` once the tool runs (the lease is held, the provider was called),
and wait to be killed.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import Any

from turnstate.core._conversation import Tool, ToolSpec
from turnstate.core._errors import ChatBusy
from turnstate.emulators._emulated import EMULATOR_API_KEY, kind_of
from turnstate.engine import TurnEngine, TurnInput
from turnstate.providers._transport import AiohttpTransport, RetryPolicy
from turnstate.storage import PostgresStore

PROMPT = "You are terse."
CITY = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


def provider_for(chat_index: int) -> tuple[str, str]:
    """Chats 0-9 on OpenAI (cursor), 10-14 on Gemini (cursor), 15-19 on Anthropic."""
    if chat_index < 10:
        return "openai", "gpt-4o"
    if chat_index < 15:
        return "gemini", "gemini-2.5-flash"
    return "anthropic", "claude-sonnet-4-5"


def _adapters(urls: dict[str, str]) -> dict[str, Any]:
    return {name: kind_of(name).adapter(base_url=url, api_key=EMULATOR_API_KEY)
            for name, url in urls.items()}


async def _one_turn(engine: TurnEngine, chat: str, turn: TurnInput) -> dict[str, Any]:
    report: dict[str, Any] = {"chat": chat, "turn": turn.turn_id, "events": 0}
    times: list[float] = []
    try:
        async for event in engine.run_turn(chat, turn):
            times.append(time.monotonic())
            report["events"] += 1
            if event.type in {"turn_completed", "turn_aborted"}:
                report["outcome"] = "committed" if event.type == "turn_completed" else \
                    f"aborted:{getattr(event, 'reason', '?')}"
                report["requests"] = event.stats.requests  # type: ignore[attr-defined]
    except ChatBusy:
        report["outcome"] = "busy"
        return report
    report["held"] = [times[0], times[-2]]  # strictly inside the lease
    return report


async def _until(store: PostgresStore, sql: str, *params: Any) -> None:
    """Poll the database (bounded) until ``sql`` returns true."""
    deadline = time.monotonic() + 60
    while not (await store.fetch_raw(sql, params))[0][0]:
        if time.monotonic() > deadline:
            msg = f"timed out waiting for: {sql} {params}"
            raise TimeoutError(msg)
        await asyncio.sleep(0.003)


async def _mark(store: PostgresStore, round_: int, worker: int, what: str) -> None:
    await store.fetch_raw("INSERT INTO mp_sync VALUES ($1, $2, $3)", (round_, worker, what))


_COUNT = "SELECT count(*) >= $3 FROM mp_sync WHERE round = $1 AND what = $2"


async def run_turns(config: dict[str, Any]) -> None:
    """Rounds: every worker starts round r's turn on chat ``r % chats`` together (a
    barrier in ``mp_sync``); the one that takes the lease holds it, inside its tool call,
    until every other worker has been refused."""
    worker, chats, workers = config["worker"], config["chats"], config["workers"]
    async with PostgresStore.open(config["dsn"], schema=config["schema"], pool_max=2) as store, \
            AiohttpTransport(retry=RetryPolicy(base_delay=0.0, max_delay=0.0)) as transport:
        engine = TurnEngine(store, _adapters(config["urls"]), transport)
        for index in range(config["turns"]):
            async def hold(args: dict[str, Any], index: int = index) -> Any:
                await _until(store, _COUNT, index, "busy", workers - 1)
                return {"echo": args}

            tool = Tool(spec=ToolSpec(name="weather", description="the weather",
                                      parameters=CITY), handler=hold)
            chat_index = index % chats
            provider, model = provider_for(chat_index)
            turn = TurnInput(provider=provider, model=model, system_prompt=PROMPT,
                             user_text=f'w{worker} t{index} [[call:weather {{"city": "Porto"}}]]',
                             tools=(tool,), turn_id=f"w{worker}-{index}")
            await _mark(store, index, worker, "ready")
            await _until(store, _COUNT, index, "ready", workers)
            report = await _one_turn(engine, f"c{chat_index}", turn)
            if report["outcome"] == "busy":
                await _mark(store, index, worker, "busy")
            print(json.dumps(report), flush=True)


async def run_victim(config: dict[str, Any]) -> None:
    async def stuck(args: dict[str, Any]) -> Any:
        print(f"READY {config['turn_id']}", flush=True)
        await asyncio.Event().wait()

    tool = Tool(spec=ToolSpec(name="weather", description="the weather", parameters=CITY),
                handler=stuck, timeout=3600)
    async with PostgresStore.open(config["dsn"], schema=config["schema"], pool_max=1) as store, \
            AiohttpTransport() as transport:
        engine = TurnEngine(store, _adapters(config["urls"]), transport,
                            lease_seconds=config["lease_seconds"])
        turn = TurnInput(provider="openai", model="gpt-4o", system_prompt=PROMPT,
                         user_text='[[call:weather {"city": "Oslo"}]] and then?',
                         tools=(tool,), turn_id=config["turn_id"])
        async for _ in engine.run_turn(config["chat"], turn):
            pass


def main() -> None:
    config = json.loads(sys.argv[1])
    asyncio.run(run_victim(config) if config["mode"] == "victim" else run_turns(config))


if __name__ == "__main__":
    main()
