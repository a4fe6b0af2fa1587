"""What a long chat costs, per provider and strategy, with and without prompt caching.

One scripted 40-turn conversation (a ~3,000-token system prompt, three tools, a tool
call every third turn) runs through ``TurnEngine`` against each provider's emulator,
whose prompt cache follows the provider's rules (``turnstate/emulators/_prompt_cache``).
For every provider and mode (cursor and replay for the durable providers, local loop
for the stateless ones) it prints the billed input tokens and the USD at list price
(``TurnStats.cost``), cumulative at turns 1, 10 and 40, for:

* ``auto``: turnstate's caching (breakpoints, cache keys, stable prefixes);
* ``(a) no cache``: the same conversation with ``CachePolicy.OFF``, every input token
  billed at the input rate (OpenAI and Gemini cache implicitly whatever a request says,
  so their no-cache figure is the price of the same tokens with no discount);
* ``(b) system only`` (Anthropic): one breakpoint on the system prompt, the common
  hand-written setup.

and the cache-hit ratio of the replayed prefix: from turn 3 on, the share of each
request's input read from the cache (the lowest turn, and the mean).

Run: ``python -m benchmarks.bench_cost [--turns 40] [--json]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

import attrs

from turnstate.core import CachePolicy, ContextSettings, ModelPrice, TurnCompleted, Usage
from turnstate.core._conversation import Tool, ToolSpec
from turnstate.core._cost import turn_cost, usd_text
from turnstate.core._json import compact_json
from turnstate.core._registry import DEFAULT_REGISTRY
from turnstate.emulators._emulated import EMULATOR_API_KEY, EmulatedProviders
from turnstate.engine import TurnEngine, TurnInput
from turnstate.providers import AnthropicAdapter
from turnstate.providers._protocol import ProviderCall
from turnstate.providers._transport import AiohttpTransport
from turnstate.storage import MemoryStore

MODELS = {"anthropic": "claude-sonnet-4-5", "openai": "gpt-4.1", "gemini": "gemini-2.5-flash",
          "openai-compatible": "gpt-4o-mini", "deepseek": "deepseek-chat"}
BENCH_PRICES = {"deepseek": ModelPrice(input="0.30", cached_input="0.006", output="1.20",
                                        source="api-docs.deepseek.com/quick_start/pricing, "
                                        "deepseek-flash at its peak-hour rate",
                                        read_on="2026-12-04")}
"""Prices for the models the registry leaves unpriced: DeepSeek bills by the hour of the
day (docs/decisions.md, 2026-12-04), so the table prices it at its peak rate."""
DURABLE = ("openai", "gemini")
SYSTEM = "".join(f"Rule {n}: answer plainly, cite the tool you used, keep the user's units, "
                 "and never invent a figure the tools did not give. " for n in range(1, 101))
CHECKPOINTS = (1, 10, 40)


async def _weather(args: dict[str, Any]) -> Any:
    return {"city": args.get("city"), "forecast": "mild, light wind, 18 C", "source": "bench"}


def tools() -> tuple[Tool, ...]:
    schema = {"type": "object", "properties": {"city": {"type": "string"}}}
    return tuple(Tool(spec=ToolSpec(name=name, description=f"The {name} service. " * 8,
                                    parameters=schema), handler=_weather)
                 for name in ("weather", "calendar", "currency"))


def user_text(turn: int) -> str:
    text = (f"Turn {turn}: here is what I am planning this week, with the details that "
            f"matter for the trip and the budget, item {turn} of the list. ") * 2
    if turn % 3 == 0:
        return f'[[call:weather {{"city": "City {turn}"}}]] {text}'
    return text


class SystemOnlyAnthropic(AnthropicAdapter):
    """Baseline (b): a single breakpoint on the system prompt, on every request."""

    def body(self, call: ProviderCall) -> bytes:
        payload = json.loads(super().body(attrs.evolve(call, cache=CachePolicy.OFF)))
        payload["system"] = [{"type": "text", "text": payload["system"],
                              "cache_control": {"type": "ephemeral"}}]
        return compact_json(payload).encode()


@attrs.frozen(kw_only=True)
class Run:
    provider: str
    mode: str
    setup: str
    usages: tuple[Usage, ...]  # one per turn
    costs: tuple[Decimal, ...]  # cumulative USD after each turn
    ratios: tuple[float, ...]  # cache-read share of each turn's input

    def input_tokens(self, upto: int) -> int:
        return sum(u.input_tokens for u in self.usages[:upto])


async def run(provider: str, mode: str, setup: str, turns: int) -> Run:
    policy = CachePolicy.OFF if setup != "auto" else CachePolicy.AUTO
    async with EmulatedProviders([provider]) as stack, AiohttpTransport() as transport:
        adapters = dict(stack.adapters)
        if setup == "(b) system only":
            adapters[provider] = SystemOnlyAnthropic(base_url=stack.base_url(provider),
                                                     api_key=EMULATOR_API_KEY)
        store = MemoryStore()
        engine = TurnEngine(store, adapters, transport, cache_policy=policy)
        chat = await store.create_chat(owner="bench")
        price = DEFAULT_REGISTRY.model(provider, MODELS[provider]).price or BENCH_PRICES[provider]
        usages, costs, ratios, total = [], [], [], Decimal(0)
        for turn in range(1, turns + 1):
            if mode == "replay":
                await store.clear_provider_state(chat.id, reason="bench: forced replay")
            usage = await one_turn(engine, chat.id, provider, turn)
            usages.append(usage)
            total += billed(usage, price, setup)
            costs.append(total)
            ratios.append(usage.cached_input_tokens / max(1, usage.input_tokens))
        return Run(provider=provider, mode=mode, setup=setup, usages=tuple(usages),
                   costs=tuple(costs), ratios=tuple(ratios))


def billed(usage: Usage, price: ModelPrice, setup: str) -> Decimal:
    if setup == "(a) no cache":  # every input token at the input rate
        usage = Usage(input_tokens=usage.input_tokens, output_tokens=usage.output_tokens)
    cost = turn_cost(usage, price)
    assert cost is not None
    return cost.total


async def one_turn(engine: TurnEngine, chat_id: str, provider: str, turn: int) -> Usage:
    final = None
    async for event in engine.run_turn(chat_id, TurnInput(
            provider=provider, model=MODELS[provider], system_prompt=SYSTEM,
            user_text=user_text(turn), tools=tools(),
            context=ContextSettings(provider_compaction_enabled=False))):
        final = event
    if not isinstance(final, TurnCompleted):
        msg = f"{provider} turn {turn} did not complete: {final!r}"
        raise RuntimeError(msg)
    return final.stats.usage


def plans() -> list[tuple[str, str, str]]:
    out = []
    for provider in MODELS:
        modes = ("cursor", "replay") if provider in DURABLE else ("local_loop",)
        setups = ["auto", "(a) no cache"]
        if provider == "anthropic":
            setups.append("(b) system only")
        out += [(provider, mode, setup) for mode in modes for setup in setups]
    return out


def row(r: Run) -> dict[str, Any]:
    late = r.ratios[2:] or r.ratios
    return {"provider": r.provider, "mode": r.mode, "setup": r.setup,
            "inputTokens": r.input_tokens(len(r.usages)),
            "cachedTokens": sum(u.cached_input_tokens for u in r.usages),
            "writtenTokens": sum(u.cache_write_tokens for u in r.usages),
            "usd": {str(t): usd_text(r.costs[t - 1].quantize(Decimal("0.0001")))
                    for t in CHECKPOINTS if t <= len(r.costs)},
            "hitRatioFromTurn3": {"min": round(min(late), 3),
                                  "mean": round(sum(late) / len(late), 3)}}


def table(rows: Sequence[dict[str, Any]], turns: int) -> str:
    marks = [t for t in CHECKPOINTS if t <= turns]
    head = ("| provider | mode | setup | input tokens | cached | written | "
            + " | ".join(f"USD @{t}" for t in marks) + " | hit ratio from turn 3 (min/mean) |")
    lines = [head, "|" + "---|" * (7 + len(marks))]
    for r in rows:
        usd = " | ".join(r["usd"][str(t)] for t in marks)
        ratio = r["hitRatioFromTurn3"]
        plain = r["setup"] == "(a) no cache"
        hits = "—" if plain else f"{ratio['min']:.2f} / {ratio['mean']:.2f}"
        cached = ("billed as input", "—") if plain else (f"{r['cachedTokens']:,}",
                                                          f"{r['writtenTokens']:,}")
        lines.append(f"| {r['provider']} | {r['mode']} | {r['setup']} | {r['inputTokens']:,} | "
                     f"{cached[0]} | {cached[1]} | {usd} | {hits} |")
    return "\n".join(lines)


def checks(runs: Sequence[Run]) -> list[str]:
    """The issue's targets, each with its figure."""
    by = {(r.provider, r.mode, r.setup): r for r in runs}
    out = []
    auto, none, sys_only = (by[("anthropic", "local_loop", s)]
                            for s in ("auto", "(a) no cache", "(b) system only"))
    out.append(f"anthropic auto / (a) at turn {len(auto.costs)}: "
               f"{auto.costs[-1] / none.costs[-1]:.3f} (target <= 0.25)")
    out.append(f"anthropic auto / (b) at turn {len(auto.costs)}: "
               f"{auto.costs[-1] / sys_only.costs[-1]:.3f} (target <= 0.6)")
    out.append(f"anthropic one-turn chat auto / (a): {auto.costs[0] / none.costs[0]:.3f} "
               "(target <= 1.05)")
    for r in runs:
        if r.setup == "auto" and len(r.ratios) > 2:
            out.append(f"{r.provider} {r.mode}: lowest hit ratio from turn 3 "
                       f"{min(r.ratios[2:]):.3f} (target >= 0.90)")
    return out


async def main(turns: int, as_json: bool) -> None:
    runs = [await run(p, m, s, turns) for p, m, s in plans()]
    rows = [row(r) for r in runs]
    if as_json:
        print(json.dumps({"turns": turns, "rows": rows, "checks": checks(runs)}, indent=2))
        return
    print(f"bench_cost: {turns} turns, system prompt ~{len(SYSTEM) // 4:,} tokens, "
          "3 tools, a tool call every third turn; USD at list price, cumulative\n")
    print(table(rows, turns))
    print()
    for line in checks(runs):
        print(line)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=40)
    parser.add_argument("--json", action="store_true")
    options = parser.parse_args()
    asyncio.run(main(options.turns, options.json))
