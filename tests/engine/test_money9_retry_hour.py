"""A DeepSeek request retried across the peak boundary is priced by the start of the
request the provider answered (money9): the transport records when it sent each HTTP
request (``AttemptBudget.started``). The first try starts at 00:59:59 UTC and is refused
(503, not billed); the retry starts at 01:00:01, in the peak hours: the turn's one billed
request is priced at the peak rates, not at the off-peak ones of the call's first send."""

from __future__ import annotations

from datetime import UTC, datetime

from tests.engine.support import collect, make_turn
from turnstate.core._conversation import Usage
from turnstate.core._cost import turn_cost
from turnstate.core._events import TurnCompleted
from turnstate.core._prices import PRICES
from turnstate.emulators import EmulatedProviders, Fault
from turnstate.engine import TurnEngine
from turnstate.providers import RetryPolicy
from turnstate.providers._transport import AiohttpTransport
from turnstate.storage import MemoryStore, decode_audit

BEFORE = datetime(2026, 12, 1, 0, 59, 59, tzinfo=UTC)
AFTER = datetime(2026, 12, 1, 1, 0, 1, tzinfo=UTC)


async def _no_sleep(_: float) -> None:
    return None


async def test_a_retried_deepseek_request_is_priced_by_the_start_of_the_retry() -> None:
    async with EmulatedProviders(["deepseek"]) as providers, AiohttpTransport(
            sleep=_no_sleep, retry=RetryPolicy(max_attempts=3)) as transport:
        emulator = providers.emulators["deepseek"]

        def clock() -> datetime:  # the boundary passes once the first request is in
            return AFTER if emulator.requests else BEFORE

        store = MemoryStore(clock=clock)
        engine = TurnEngine(store, providers.adapters, transport, clock=clock)
        chat = await store.create_chat(owner="alice")
        emulator.faults.push(Fault(status=503, body={"error": {"message": "busy"}}))
        final = (await collect(engine.run_turn(chat.id, make_turn(
            "hello", provider="deepseek", model="deepseek-v4-pro")))).events[-1]
        assert isinstance(final, TurnCompleted), final
        assert final.stats.retries == 1 and len(emulator.requests) == 2
        usage = final.stats.usage
        price = PRICES["deepseek", "deepseek-v4-pro"]
        peak = turn_cost(usage, price, started=AFTER)
        off_peak = turn_cost(usage, price, started=BEFORE)
        assert peak is not None and off_peak is not None and peak.total > off_peak.total
        assert isinstance(usage, Usage) and usage.input_tokens > 0
        assert final.stats.cost == peak  # one billed request: the retry's, at peak
        answer = (await store.list_messages(chat.id))[-1]
        stored = (decode_audit(answer.provider_state or "").metadata or {})["costUsd"]
        assert stored == peak.as_json()
