"""What a turn of several requests bills (money9): DeepSeek's requests priced by the UTC
hour each started, and the responses' counts summed over the turn, on the scripted
backend with a clock the test moves (no sleeps)."""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncGenerator
from datetime import UTC, datetime
from typing import Any

import attrs

from tests.engine.support import FakeClock, collect, make_turn, tool
from turnstate.core._conversation import Usage
from turnstate.core._cost import turn_cost
from turnstate.core._events import TurnCompleted
from turnstate.core._prices import PRICES
from turnstate.emulators._scripted import ScriptedAdapter, ScriptedBackend, ScriptStep
from turnstate.engine import TurnEngine
from turnstate.engine._run_bill import TurnBill
from turnstate.providers._protocol import (
    ErrorClassifier,
    HttpRequest,
    ProviderResponse,
    SseEvent,
)
from turnstate.storage import MemoryStore, decode_audit

PRO = PRICES["deepseek", "deepseek-v4-pro"]


class _SlowBackend(ScriptedBackend):
    """Each answer takes ``seconds`` of the fake clock: a request that starts just before
    a boundary ends after it, and the next request starts after it."""

    def __init__(self, clock: FakeClock, seconds: float) -> None:
        super().__init__()
        self.clock, self.seconds = clock, seconds

    async def stream(self, request: HttpRequest,
                     classify: ErrorClassifier) -> AsyncGenerator[SseEvent, None]:
        self.clock.advance(seconds=self.seconds)
        async for event in super().stream(request, classify):
            yield event


class _Noted:
    """A scripted parser whose response carries the next of ``notes`` as its metadata."""

    def __init__(self, parser: Any, notes: deque[dict[str, Any]]) -> None:
        self.parser, self.notes = parser, notes

    @property
    def done(self) -> bool:
        return bool(self.parser.done)

    def feed(self, event: SseEvent) -> Any:
        return self.parser.feed(event)

    def finish(self) -> ProviderResponse:
        response: ProviderResponse = self.parser.finish()
        return attrs.evolve(response, metadata=self.notes.popleft())


class _NotedAdapter(ScriptedAdapter):
    def __init__(self, provider: str, notes: list[dict[str, Any]]) -> None:
        super().__init__(provider)
        self.notes = deque(notes)

    def stream_parser(self) -> Any:
        return _Noted(super().stream_parser(), self.notes)


async def _deepseek_turn(start: datetime) -> tuple[TurnCompleted, list[Usage], str | None]:
    clock = FakeClock(start)
    backend = _SlowBackend(clock, 60)
    store = MemoryStore(clock=clock)
    engine = TurnEngine(store, backend.adapters(), backend, clock=clock)
    chat = await store.create_chat(owner="alice")
    backend.push("deepseek", ScriptStep.call(("lookup", {"q": "x"})),
                 ScriptStep.reply("y" * 400))
    outcome = await collect(engine.run_turn(chat.id, make_turn(
        "hello", provider="deepseek", model="deepseek-v4-pro", tools=(tool("lookup"),))))
    final = outcome.final
    assert isinstance(final, TurnCompleted), final
    texts = ["", "y" * 400]
    usages = [Usage(input_tokens=r.size // 4, output_tokens=len(text) // 4)
              for r, text in zip(backend.requests, texts, strict=True)]
    answer = (await store.list_messages(chat.id))[-1]
    cost = (decode_audit(answer.provider_state or "").metadata or {}).get("costUsd")
    return final, usages, cost["total"] if isinstance(cost, dict) else None


async def test_a_deepseek_turn_across_the_peak_boundary_prices_each_request_by_its_start(
) -> None:
    """The first request starts at 00:59:30 UTC and ends a minute later, in the peak
    hours: priced off-peak, by its start; the second starts at 01:00:30: peak."""
    final, usages, stored = await _deepseek_turn(datetime(2026, 12, 1, 0, 59, 30, tzinfo=UTC))
    off_peak = turn_cost(usages[0], PRO.at(datetime(2026, 12, 1, 0, 59, tzinfo=UTC)))
    peak = turn_cost(usages[1], PRO.at(datetime(2026, 12, 1, 1, 0, tzinfo=UTC)))
    assert off_peak is not None and peak is not None
    assert usages[0].input_tokens > 0 and usages[1].output_tokens == 100
    assert final.stats.cost is not None
    assert final.stats.cost.total == off_peak.total + peak.total
    assert stored == str(final.stats.cost.total.normalize())  # stored and streamed agree
    # the second request's output at the peak rate: twice the off-peak one
    assert peak.output == usages[1].output_tokens * PRO.output * 2 / 1_000_000


async def test_a_deepseek_turn_leaving_the_peak_hours_prices_each_request_by_its_start(
) -> None:
    """09:59:30 is peak, 10:00:30 off-peak: the other boundary, the other way."""
    final, usages, stored = await _deepseek_turn(datetime(2026, 12, 1, 9, 59, 30, tzinfo=UTC))
    peak = turn_cost(usages[0], PRO.at(datetime(2026, 12, 1, 9, 59, 30, tzinfo=UTC)))
    off_peak = turn_cost(usages[1], PRO.at(datetime(2026, 12, 1, 10, 0, 30, tzinfo=UTC)))
    assert peak is not None and off_peak is not None and final.stats.cost is not None
    assert final.stats.cost.total == peak.total + off_peak.total
    assert stored == str(final.stats.cost.total.normalize())


async def test_counts_in_the_responses_metadata_are_summed_over_the_turn() -> None:
    """A Gemini tool loop whose two answers each streamed images: the audit said the last
    answer's count (``{"image": 2}``), not the turn's; other keys keep their merge."""
    clock = FakeClock()
    backend = ScriptedBackend()
    adapters: dict[str, Any] = dict(backend.adapters())
    adapters["gemini"] = _NotedAdapter("gemini", [
        {"droppedOutput": {"image": 1}, "stopDetails": {"first": True},
         "droppedToolCalls": [{"name": "a"}], "serverRefusedFields": ["seed"]},
        {"droppedOutput": {"audio": 1, "image": 2}, "stopDetails": {"last": True},
         "droppedToolCalls": [{"name": "b"}], "serverRefusedFields": ["logprobs", "seed"]},
    ])
    store = MemoryStore(clock=clock)
    engine = TurnEngine(store, adapters, backend, clock=clock)
    chat = await store.create_chat(owner="alice")
    backend.push("gemini", ScriptStep.call(("lookup", {"q": "x"})), ScriptStep.reply("done"))
    outcome = await collect(engine.run_turn(chat.id, make_turn(
        "draw", provider="gemini", model="gemini-2.5-flash", tools=(tool("lookup"),))))
    assert isinstance(outcome.final, TurnCompleted), outcome.final
    answer = (await store.list_messages(chat.id))[-1]
    metadata = decode_audit(answer.provider_state or "").metadata or {}
    assert metadata["droppedOutput"] == {"audio": 1, "image": 3}
    assert metadata["stopDetails"] == {"last": True}
    assert metadata["droppedToolCalls"] == [{"name": "a"}, {"name": "b"}]
    assert metadata["serverRefusedFields"] == ["logprobs", "seed"]


async def test_a_deepseek_request_without_a_known_start_leaves_the_turn_unpriced() -> None:
    """A caller of ``absorb`` that knows no start (none passed, none recorded): no cost and
    the audit counts the request (``unpricedRequests``), never the other requests alone."""
    clock = FakeClock(datetime(2026, 12, 1, 12, 0, tzinfo=UTC))
    backend = ScriptedBackend()
    store = MemoryStore(clock=clock)
    engine = TurnEngine(store, backend.adapters(), backend, clock=clock)
    chat = await store.create_chat(owner="alice")
    original = TurnBill.count_request

    def no_start(self: TurnBill, size: int, sent_at: datetime | None = None) -> None:
        original(self, size, None if self.stats.requests else sent_at)  # 2nd: unknown

    backend.push("deepseek", ScriptStep.call(("lookup", {"q": "x"})), ScriptStep.reply("ok"))
    TurnBill.count_request = no_start  # type: ignore[method-assign]
    try:
        outcome = await collect(engine.run_turn(chat.id, make_turn(
            "hello", provider="deepseek", model="deepseek-v4-pro", tools=(tool("lookup"),))))
    finally:
        TurnBill.count_request = original  # type: ignore[method-assign]
    final = outcome.final
    assert isinstance(final, TurnCompleted) and final.stats.requests == 2
    assert final.stats.cost is None
    answer = (await store.list_messages(chat.id))[-1]
    metadata = decode_audit(answer.provider_state or "").metadata or {}
    assert metadata["unpricedRequests"] == 1 and "costUsd" not in metadata
