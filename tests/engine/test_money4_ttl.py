"""The ``adaptive`` cache policy: one-hour Anthropic entries for a slow chat (money4).

With five-minute entries a chat whose user answers every ten minutes found its entries
gone at every turn and wrote its whole prefix again at 1.25x the input rate: 40 turns of
``benchmarks/bench_cache_ttl`` cost $0.996 where no cache costs $1.025 and one-hour
entries $0.221. ``adaptive`` writes one-hour entries when the chat's previous answer
ended between 4.5 minutes and an hour before the turn, five-minute ones otherwise, and
the turn's cost prices each write at its lifetime's rate (the usage's split).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from benchmarks.bench_cache_ttl import StepClock, chat_cost
from turnstate.core import CachePolicy, ContextSettings, TurnCompleted
from turnstate.core._conversation import Message, MessageStatus, TextPart
from turnstate.core._cost import adaptive_policy, turn_cost
from turnstate.core._registry import DEFAULT_REGISTRY
from turnstate.emulators import EmulatedProviders
from turnstate.engine import TurnEngine, TurnInput
from turnstate.providers._transport import AiohttpTransport
from turnstate.storage import MemoryStore

NOW = datetime(2026, 12, 5, 9, tzinfo=UTC)
SYSTEM = "".join(f"Rule {n}: answer plainly and keep the user's units. " for n in range(120))


def _answered(minutes_ago: float) -> tuple[Message, ...]:
    at = NOW - timedelta(minutes=minutes_ago)
    return (Message(id="m1", chat_id="c", seq=1, role="assistant",
                    status=MessageStatus.COMPLETED, parts=(TextPart(text="hi"),),
                    created_at=at, updated_at=at),)


@pytest.mark.parametrize(("minutes", "policy"), [
    (1, CachePolicy.AUTO), (4.4, CachePolicy.AUTO), (4.6, CachePolicy.TTL_1H),
    (30, CachePolicy.TTL_1H), (59, CachePolicy.TTL_1H), (61, CachePolicy.AUTO)])
def test_the_policy_follows_the_gap_since_the_last_answer(
        minutes: float, policy: CachePolicy) -> None:
    assert adaptive_policy(_answered(minutes), NOW) is policy


def test_a_new_chat_writes_five_minute_entries() -> None:
    assert adaptive_policy((), NOW) is CachePolicy.AUTO


async def _chat(policy: CachePolicy, minutes: float, turns: int) -> list[TurnCompleted]:
    async with EmulatedProviders(["anthropic"]) as stack, AiohttpTransport() as transport:
        clock = StepClock()
        store = MemoryStore(clock=clock)
        engine = TurnEngine(store, stack.adapters, transport, clock=clock)
        chat = await store.create_chat(owner="alice")
        finals = []
        for turn in range(1, turns + 1):
            if turn > 1:
                clock.advance(minutes)
                stack.emulators["anthropic"].cache.advance(minutes * 60)  # type: ignore[attr-defined]
            final = None
            async for event in engine.run_turn(chat.id, TurnInput(
                    provider="anthropic", model="claude-sonnet-4-5", system_prompt=SYSTEM,
                    user_text=f"Turn {turn}: " + "the plan in detail " * 40,
                    context=ContextSettings(cache=policy))):
                final = event
            assert isinstance(final, TurnCompleted), final
            finals.append(final)
        return finals


async def test_a_slow_chat_writes_one_hour_entries_and_reads_them() -> None:
    slow = await _chat(CachePolicy.ADAPTIVE, 10, 4)
    five = await _chat(CachePolicy.AUTO, 10, 4)
    price = DEFAULT_REGISTRY.model("anthropic", "claude-sonnet-4-5").price
    for final in slow[1:]:
        usage = final.stats.usage
        assert usage.cache_write_tokens > 0
        assert usage.cache_write_1h_tokens == usage.cache_write_tokens  # all 1h
        cost = turn_cost(usage, price)
        assert final.stats.cost == cost and cost is not None
        assert cost.cache_write == Decimal(6) * usage.cache_write_tokens / 10**6  # 2x
    # Each later turn reads what the previous one wrote; with five-minute entries it
    # reads nothing and writes the whole prefix again.
    assert all(f.stats.usage.cached_input_tokens > 0 for f in slow[2:])
    assert all(f.stats.usage.cached_input_tokens == 0 for f in five[2:])
    total = sum((f.stats.cost.total for f in slow if f.stats.cost), Decimal(0))
    assert total < sum((f.stats.cost.total for f in five if f.stats.cost), Decimal(0))


async def test_a_quick_chat_keeps_five_minute_entries() -> None:
    quick = await _chat(CachePolicy.ADAPTIVE, 3, 4)
    five = await _chat(CachePolicy.AUTO, 3, 4)
    assert [f.stats.usage for f in quick] == [f.stats.usage for f in five]
    assert [f.stats.cost for f in quick] == [f.stats.cost for f in five]
    assert all(f.stats.usage.cache_write_1h_tokens == 0 for f in quick)


async def test_forty_turns_every_ten_minutes_cost_a_quarter_with_adaptive() -> None:
    """The figures of docs/decisions.md (2026-12-05, money4)."""
    assert await chat_cost(CachePolicy.AUTO, 10, 40) == Decimal("0.99631305")
    assert await chat_cost(CachePolicy.ADAPTIVE, 10, 40) == Decimal("0.2205003")
    assert await chat_cost(CachePolicy.ADAPTIVE, 3, 40) == Decimal("0.1992768")
