"""``turnstate demo``: the whole continuation story in one run, with no keys and no network.

The five provider emulators run on loopback; a scripted conversation goes through
``TurnEngine`` on an SQLite file and shows, turn by turn: a first turn that replays, a
turn continued by cursor, a tool loop chained by cursor, a cursor the provider expired
(degrade, replay, recover), a system prompt change, a switch to Anthropic (local loop,
cursor cleared), a DeepSeek thinking tool loop with prompt-cache hits, Gemini turns with
a tool call, a cursor lost while tool results were in flight (the turn aborts rather
than drop them), a context window filling up, and an Anthropic compaction (a long pasted
journal crosses the trigger; the next turn sends only the summary and what follows).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import attrs

from turnstate.commands._common import Subparsers
from turnstate.core._conversation import OpaquePart, Tool, ToolSpec
from turnstate.core._cost import usd_text
from turnstate.core._decisions import Strategy
from turnstate.core._events import ContextSnapshotEvent, TurnAborted, TurnCompleted
from turnstate.core._registry import DEFAULT_REGISTRY, ModelInfo
from turnstate.emulators._chat_completions import prompt_segments, tokens
from turnstate.emulators._emulated import EmulatedProviders
from turnstate.engine._driver import TurnEngine
from turnstate.engine._turn_input import TurnInput
from turnstate.providers._protocol import ProviderCall
from turnstate.providers._transport import AiohttpTransport
from turnstate.storage import Store, open_store, redact_dsn

PROMPT = "You are a concise travel assistant."
NEW_PROMPT = "You are a concise travel assistant. Answer in one sentence."
SMALL_MODEL = "demo-small-context"
COMPACTING_MODEL = ModelInfo(provider="anthropic", name="demo-compacting",
                             context_limit=64_000, compaction=True)
JOURNAL = "Here is my travel journal, keep it in mind: " + " ".join(
    f"Day {day}: walked the old town, ate pastel de nata, took the tram to Belem."
    for day in range(1, 2900))


@attrs.frozen(kw_only=True)
class DemoTurn:
    """One scripted turn; ``before`` runs first (e.g. the provider forgets a cursor)."""

    title: str
    provider: str
    model: str
    text: str
    prompt: str = PROMPT
    before: Callable[[Demo], Awaitable[None]] | None = None


def _tool(name: str, description: str, handler: Callable[[dict[str, Any]], Awaitable[Any]],
          ) -> Tool:
    schema = {"type": "object", "properties": {"city": {"type": "string"}},
              "required": ["city"]}
    return Tool(spec=ToolSpec(name=name, description=description, parameters=schema),
                handler=handler)


class Demo:
    """The running demo: emulators, store, engine and the timeline it records."""

    def __init__(self, stack: EmulatedProviders, store: Store, engine: TurnEngine,
                 chat_id: str) -> None:
        self.stack, self.store, self.engine, self.chat_id = stack, store, engine, chat_id
        self.rows: list[dict[str, Any]] = []
        self.turn_ids: list[str] = []
        self.tools = (
            _tool("get_weather", "Current weather of a city", self._weather),
            _tool("get_time", "Local time of a city", self._time),
            _tool("book_table", "Book a restaurant table in a city", self._book),
        )

    async def _weather(self, args: dict[str, Any]) -> Any:
        return {"city": args["city"], "forecast": "sunny", "tempC": 21}

    async def _time(self, args: dict[str, Any]) -> Any:
        return {"city": args["city"], "local": "14:05"}

    async def _book(self, args: dict[str, Any]) -> Any:
        # While this tool runs, the provider loses every stored interaction: the
        # tool's result now exists only in this process.
        self.stack.emulators["gemini"].evict_all()  # type: ignore[attr-defined]
        return {"city": args["city"], "booked": "19:30"}

    async def run(self, turn: DemoTurn) -> dict[str, Any]:
        if turn.before is not None:
            await turn.before(self)
        request = TurnInput(provider=turn.provider, model=turn.model,
                            system_prompt=turn.prompt, user_text=turn.text, tools=self.tools)
        snapshot = None
        final: TurnCompleted | TurnAborted | None = None
        async for event in self.engine.run_turn(self.chat_id, request):
            if isinstance(event, ContextSnapshotEvent):
                snapshot = event.snapshot
            elif isinstance(event, TurnCompleted | TurnAborted):
                final = event
        assert final is not None
        self.turn_ids.append(final.turn_id)
        row = _row(len(self.rows) + 1, turn, final, snapshot)
        row["compacted"] = await self._compacted(final)
        self.rows.append(row)
        return row

    async def _compacted(self, final: TurnCompleted | TurnAborted) -> bool:
        """Whether the provider compacted in this turn (its answer holds a compaction)."""
        if isinstance(final, TurnAborted):
            return False
        last = (await self.store.load_history(self.chat_id))[-1]
        return any(isinstance(p, OpaquePart) and p.kind == "compaction" for p in last.parts)


def _row(index: int, turn: DemoTurn, final: TurnCompleted | TurnAborted,
         snapshot: Any) -> dict[str, Any]:
    usage = final.stats.usage
    return {
        "index": index,
        "title": turn.title,
        "turnId": final.turn_id,
        "provider": turn.provider,
        "model": turn.model,
        "strategy": final.strategy,
        "path": [final.path[0].source, *(s.dest for s in final.path)],
        "degradation": final.degradation,
        "abort": final.reason if isinstance(final, TurnAborted) else None,
        "toolCalls": final.stats.tool_calls,
        "requests": final.stats.requests,
        "requestBytes": final.stats.request_bytes,
        "cacheHitTokens": usage.cache_hit_tokens or 0,
        "cacheMissTokens": usage.cache_miss_tokens or 0,
        "inputTokens": usage.input_tokens,
        "cacheReadTokens": usage.cached_input_tokens,
        "cacheWriteTokens": usage.cache_write_tokens,
        "costUsd": None if final.stats.cost is None else usd_text(final.stats.cost.total),
        "context": None if snapshot is None else {
            "severity": snapshot.severity.value,
            "estimatedUsageRatio": round(snapshot.estimated_usage_ratio, 4),
            "inputTokens": snapshot.estimated_input_tokens,
            "contextLimit": snapshot.context_limit,
            "source": snapshot.source.value,
        },
    }


async def _expire_openai_cursor(demo: Demo) -> None:
    chat = await demo.store.load_chat(demo.chat_id)
    envelope = json.loads(chat.last_provider_state or "{}")
    demo.stack.emulators["openai"].expire(envelope["cursor"])  # type: ignore[attr-defined]


async def _small_context_model(demo: Demo) -> None:
    """Register a model whose window this conversation fills to about 90%.

    The size comes from the request the adapter is about to send, counted the way the
    emulator will report it, so the snapshot lands in the warning band.
    """
    history = await demo.store.load_history(demo.chat_id)
    call = ProviderCall(strategy=Strategy.LOCAL_LOOP,
                        model=DEFAULT_REGISTRY.model("openai-compatible", SMALL_MODEL),
                        system_prompt=PROMPT, tools=tuple(t.spec for t in demo.tools),
                        history=history,
                        user_text=next(t.text for t in SCRIPT if t.model == SMALL_MODEL))
    request = demo.stack.adapters["openai-compatible"].build_request(call)
    reported = tokens(sum(map(len, prompt_segments(json.loads(request.body)))))
    limit = max(64, math.ceil(reported / 0.9))
    demo.engine.registry = demo.engine.registry.with_model(
        ModelInfo(provider="openai-compatible", name=SMALL_MODEL, context_limit=limit))


async def _compacting_model(demo: Demo) -> None:
    """Register a 64,000-token Anthropic model that compacts (trigger: 51,200 tokens),
    with the same window in its emulator."""
    demo.engine.registry = demo.engine.registry.with_model(COMPACTING_MODEL)
    emulator: Any = demo.stack.emulators["anthropic"]
    emulator.context_windows[COMPACTING_MODEL.name] = COMPACTING_MODEL.context_limit


SCRIPT = (
    DemoTurn(title="first turn: nothing stored, the history is replayed",
             provider="openai", model="gpt-4o", text="Where should I travel in spring?"),
    DemoTurn(title="continued by cursor: only the new message is sent",
             provider="openai", model="gpt-4o", text="What is the food like there?"),
    DemoTurn(title="a tool loop chained by cursor",
             provider="openai", model="gpt-4o",
             text='[[call:get_weather {"city": "Lisbon"}]] And the weather in Lisbon?'),
    DemoTurn(title="the provider expired the cursor: degrade, replay in the same turn",
             provider="openai", model="gpt-4o", text="Is it warm enough to swim?",
             before=_expire_openai_cursor),
    DemoTurn(title="recovered: continued by the fresh cursor",
             provider="openai", model="gpt-4o", text="Thanks, that helps."),
    DemoTurn(title="the system prompt changed", provider="openai", model="gpt-4o",
             text="Summarise the plan.", prompt=NEW_PROMPT),
    DemoTurn(title="switch to Anthropic: local loop, the OpenAI cursor is cleared",
             provider="anthropic", model="claude-sonnet-4-5", prompt=NEW_PROMPT,
             text='[[call:get_time {"city": "Lisbon"}]] What time is it there?'),
    DemoTurn(title="DeepSeek thinking tool loop (prompt cache hits)",
             provider="deepseek", model="deepseek-v4-flash", prompt=NEW_PROMPT,
             text='[[think]] [[call:get_weather {"city": "Porto"}]] Compare with Porto.'),
    DemoTurn(title="DeepSeek again: the stable prefix hits the cache",
             provider="deepseek", model="deepseek-v4-flash", prompt=NEW_PROMPT,
             text="[[think]] Which city would you pick?"),
    DemoTurn(title="Gemini with a tool call", provider="gemini", model="gemini-2.5-flash",
             prompt=NEW_PROMPT, text='[[call:get_time {"city": "Porto"}]] Time in Porto?'),
    DemoTurn(title="cursor lost while tool results were in flight: abort, keep the result "
                   "out of a silent replay", provider="gemini", model="gemini-2.5-flash",
             prompt=NEW_PROMPT,
             text='[[call:book_table {"city": "Porto"}]] Book dinner for tonight.'),
    DemoTurn(title="a small context window fills up", provider="openai-compatible",
             model=SMALL_MODEL, prompt=PROMPT, text="Give me a packing list.",
             before=_small_context_model),
    DemoTurn(title="a long journal on a compacting Anthropic model: the provider compacts",
             provider="anthropic", model=COMPACTING_MODEL.name, prompt=PROMPT, text=JOURNAL,
             before=_compacting_model),
    DemoTurn(title="after the compaction: only the summary and what follows are sent",
             provider="anthropic", model=COMPACTING_MODEL.name, prompt=PROMPT,
             text="So which day was the best?"),
)


async def _run(target: str) -> tuple[Demo, float]:
    started = time.perf_counter()
    async with EmulatedProviders() as stack, AiohttpTransport() as transport, \
            open_store(target) as store:
        engine = TurnEngine(store, stack.adapters, transport, registry=DEFAULT_REGISTRY)
        chat = await store.create_chat(owner="demo")
        demo = Demo(stack, store, engine, chat.id)
        for turn in SCRIPT:
            await demo.run(turn)
    return demo, time.perf_counter() - started


def _summary(demo: Demo, seconds: float, db: str | None) -> dict[str, Any]:
    rows = demo.rows
    return {
        "chatId": demo.chat_id,
        "database": None if db is None else redact_dsn(db),
        "turns": len(rows),
        "committed": sum(1 for r in rows if r["abort"] is None),
        "aborted": sum(1 for r in rows if r["abort"] is not None),
        "degradations": [r["degradation"] for r in rows if r["degradation"]],
        "aborts": [r["abort"] for r in rows if r["abort"]],
        "strategies": {s: sum(1 for r in rows if r["strategy"] == s)
                       for s in ("cursor", "replay", "local_loop")},
        "requests": sum(r["requests"] for r in rows),
        "compactions": sum(1 for r in rows if r["compacted"]),
        "requestBytes": sum(r["requestBytes"] for r in rows),
        "cacheHitTokens": sum(r["cacheHitTokens"] for r in rows),
        "costUsd": usd_text(sum((Decimal(r["costUsd"]) for r in rows if r["costUsd"]),
                                Decimal(0))),
        "seconds": round(seconds, 3),
    }


def _style(text: str, code: str, color: bool) -> str:
    return f"\033[{code}m{text}\033[0m" if color else text


def _timeline(rows: list[dict[str, Any]], summary: dict[str, Any], color: bool) -> str:
    lines = ["turnstate demo: one chat, five providers, every turn a state machine", ""]
    for r in rows:
        head = f"{r['index']:>2}. {r['provider']} / {r['model']} / {r['strategy']}"
        lines.append(_style(head, "1", color) + f"  {r['title']}")
        lines.append("    path     " + " -> ".join(r["path"]))
        if r["degradation"]:
            lines.append("    degraded " + _style(r["degradation"], "33", color))
        if r["abort"]:
            lines.append("    aborted  " + _style(r["abort"], "31", color))
        if r["compacted"]:
            lines.append("    compacted " + _style("the provider summarised everything before "
                                                  "this answer", "36", color))
        lines.append(f"    tools    {r['toolCalls']} call(s)")
        cache = r["cacheHitTokens"] + r["cacheMissTokens"]
        hits = f"{r['cacheHitTokens']:,} of {cache:,} prompt tokens" if cache else "n/a"
        lines.append(f"    sent     {r['requestBytes']:,} bytes in {r['requests']} request(s);"
                     f" cache hits {hits}")
        lines.append(f"    input    {r['inputTokens']:,} tokens, {r['cacheReadTokens']:,} read "
                     f"from the prompt cache, {r['cacheWriteTokens']:,} written; cost "
                     + (f"${r['costUsd']}" if r["costUsd"] else "n/a (no price)"))
        ctx = r["context"]
        lines.append("    context  " + ("not committed (turn aborted)" if ctx is None else
                                        f"{ctx['severity']} ({ctx['estimatedUsageRatio']:.0%}"
                                        f" of {ctx['contextLimit']:,} tokens)"))
        lines.append("")
    lines.append(f"{summary['turns']} turns: {summary['committed']} committed, "
                 f"{summary['aborted']} aborted; {summary['requests']} requests, "
                 f"{summary['requestBytes']:,} bytes; ${summary['costUsd']} at list price; "
                 f"{summary['seconds']:.2f} s")
    if summary["database"]:
        lines.append(f"inspect it: turnstate inspect {summary['database']} {summary['chatId']}")
    return "\n".join(lines)


def add_parser(commands: Subparsers) -> None:
    demo = commands.add_parser(
        "demo", help="run the scripted continuation demo (no keys, no network)",
        description="Run a scripted chat across the five provider emulators: cursor turns, "
                    "a provider switch that replays, an expired cursor that degrades and "
                    "recovers, tool loops and an abort, then print the timeline.")
    demo.add_argument("--json", action="store_true", help="print one JSON document")
    demo.add_argument("--db", metavar="DB", help="SQLite file or postgresql:// DSN to use "
                                                 "(default: a temporary SQLite file)")


def run(args: argparse.Namespace) -> int:
    return run_demo(json_output=args.json, db=args.db)


def run_demo(*, json_output: bool = False, db: str | None = None) -> int:
    """Run the demo and print the timeline (or one JSON document)."""
    with tempfile.TemporaryDirectory(prefix="turnstate-demo-") as folder:
        target = db or str(Path(folder) / "demo.sqlite")
        demo, seconds = asyncio.run(_run(target))
        summary = _summary(demo, seconds, db)
    if json_output:
        print(json.dumps({"turns": demo.rows, "summary": summary}, indent=2))
    else:
        print(_timeline(demo.rows, summary, color=sys.stdout.isatty()))
    return 0
