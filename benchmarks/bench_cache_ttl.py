"""What a slow Anthropic chat costs with five-minute, one-hour and adaptive cache entries.

The 40-turn conversation of ``bench_cost`` (a ~3,000-token system prompt, three tools, a
tool call every third turn) runs through ``TurnEngine`` against the Anthropic emulator,
whose prompt cache expires entries as Anthropic does, with the user answering every 3,
10 or 30 minutes (the engine's, the store's and the emulator's clocks moved together).
For each pace it prints the chat's USD at list price (``TurnStats.cost``) with the cache
policies ``off``, ``auto`` (five-minute entries), ``1h`` and ``adaptive``.

Run: ``python -m benchmarks.bench_cache_ttl [--turns 40] [--json]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from datetime import UTC, datetime, timedelta
from decimal import Decimal

from benchmarks.bench_cost import MODELS, SYSTEM, tools, user_text
from turnstate.core import CachePolicy, TurnCompleted
from turnstate.core._cost import usd_text
from turnstate.emulators import EmulatedProviders
from turnstate.engine import TurnEngine, TurnInput
from turnstate.providers._transport import AiohttpTransport
from turnstate.storage import MemoryStore

PACES = (3, 10, 30)  # minutes between the chat's turns
POLICIES = (CachePolicy.OFF, CachePolicy.AUTO, CachePolicy.TTL_1H, CachePolicy.ADAPTIVE)


class StepClock:
    """A wall clock that moves only when told (``advance``)."""

    def __init__(self) -> None:
        self.now = datetime(2026, 12, 5, 9, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, minutes: float) -> None:
        self.now += timedelta(minutes=minutes)


async def chat_cost(policy: CachePolicy, minutes: float, turns: int) -> Decimal:
    """The USD of a ``turns``-turn chat whose user answers every ``minutes``."""
    async with EmulatedProviders(["anthropic"]) as stack, AiohttpTransport() as transport:
        clock = StepClock()
        store = MemoryStore(clock=clock)
        engine = TurnEngine(store, stack.adapters, transport, cache_policy=policy,
                            clock=clock)
        chat = await store.create_chat(owner="bench")
        cache = stack.emulators["anthropic"].cache  # type: ignore[attr-defined]
        total = Decimal(0)
        for turn in range(1, turns + 1):
            if turn > 1:
                clock.advance(minutes)
                cache.advance(minutes * 60)
            final = None
            async for event in engine.run_turn(chat.id, TurnInput(
                    provider="anthropic", model=MODELS["anthropic"], system_prompt=SYSTEM,
                    user_text=user_text(turn), tools=tools())):
                final = event
            assert isinstance(final, TurnCompleted), final
            assert final.stats.cost is not None
            total += final.stats.cost.total
        return total


async def main(turns: int, as_json: bool) -> None:
    rows = {f"{pace} min": {policy.value: usd_text(await chat_cost(policy, pace, turns))
                            for policy in POLICIES} for pace in PACES}
    if as_json:
        print(json.dumps(rows, indent=2))
        return
    print(f"{turns}-turn Anthropic chat ({MODELS['anthropic']}), USD at list price")
    print("pace    " + "".join(f"{p.value:>12}" for p in POLICIES))
    for pace, costs in rows.items():
        print(f"{pace:<8}" + "".join(f"{costs[p.value]:>12}" for p in POLICIES))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=40)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    asyncio.run(main(args.turns, args.json))
