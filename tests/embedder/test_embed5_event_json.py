"""Events read back from their JSON (embed5): an embedder that keeps a turn's events
(its own log, a queue, a Python client of its SSE stream) gets the typed events again
with ``parse_event``, ``event_json``'s inverse. Before, nothing read ``event_json``'s
text back: each embedder wrote its own decoder of the camelCase keys, the path steps
and the Decimal cost strings (and ``attrs.asdict`` cannot even encode an event)."""

from __future__ import annotations

from typing import Any

import pytest

from turnstate import (
    EventMalformed,
    GenerationSettings,
    Tool,
    ToolSpec,
    TurnEngine,
    TurnEvent,
    TurnInput,
    event_json,
    parse_event,
)
from turnstate.emulators import EmulatedProviders
from turnstate.testing import Fault, emulated_engine, emulated_providers, turn_events

NO_SETTINGS = GenerationSettings()
__all__ = ["emulated_engine", "emulated_providers"]  # the fixtures, imported for pytest


async def _fails(_arguments: dict[str, Any]) -> str:
    raise RuntimeError("the tool broke")


TOOLS = (Tool(spec=ToolSpec(name="broken", parameters={"type": "object", "properties": {}}),
              handler=_fails),)


async def test_every_event_a_turn_yields_reads_back_equal(
        emulated_engine: TurnEngine, emulated_providers: EmulatedProviders) -> None:
    chat = await emulated_engine.store.create_chat(owner="o")
    events: list[TurnEvent] = []
    thinking = GenerationSettings(reasoning_budget_tokens=1024, max_output_tokens=2048)
    for provider, model, text, settings in (
            ("openai", "gpt-4o", "[[call:broken {}]] Hi", NO_SETTINGS),  # an error result
            ("anthropic", "claude-sonnet-4-6", "[[think]] Hello", thinking),  # degraded
            ("openai", "gpt-4o", "again", NO_SETTINGS)):
        turn = TurnInput(provider=provider, model=model, system_prompt="s",
                         user_text=text, tools=TOOLS, settings=settings)
        events += await turn_events(emulated_engine.run_turn(chat.id, turn))
    emulated_providers.emulators["openai"].faults.push(
        Fault(status=400, body={"error": {"type": "invalid_request_error",
                                          "code": "bad", "message": "no"}}))
    turn = TurnInput(provider="openai", model="gpt-4o", system_prompt="s", user_text="x")
    events += await turn_events(emulated_engine.run_turn(chat.id, turn))

    kinds = {event.type for event in events}
    assert kinds >= {"state_changed", "continuation_degraded", "fallback_notice",
                     "text_delta", "reasoning_delta", "tool_call", "tool_result",
                     "context_snapshot", "turn_completed", "turn_aborted"}
    for event in events:
        assert parse_event(event_json(event)) == event, event.type
        assert parse_event(event_json(event, ascii_only=True).encode()) == event
    last = parse_event(event_json(events[-1]))
    assert last.type == "turn_aborted" and last.failure is not None
    costs = [e.stats.cost for e in events if e.type == "turn_completed"]
    assert costs and all(cost is not None for cost in costs)  # Decimals, exactly


@pytest.mark.parametrize("raw", [
    "not json", "[1]", '{"type": "nope"}', '{"text": "x"}',
    '{"type": "text_delta"}', '{"type": "text_delta", "text": 5}',
    '{"type": "tool_result", "callId": "c", "name": "n", "output": "o", '
    '"isError": "yes", "iteration": 1}',
    '{"type": "turn_completed", "turnId": "t", "chatId": "c", "strategy": "cursor", '
    '"degradation": null, "path": [], "text": "", "stats": {"cost": {"total": "2", '
    '"input": "1", "cachedInput": "0", "cacheWrite": "0", "output": "0"}}}',
    '{"type": "turn_completed", "turnId": "t", "chatId": "c", "strategy": "cursor", '
    '"degradation": null, "path": [], "text": "", "stats": {"cost": {"input": "NaN", '
    '"cachedInput": "0", "cacheWrite": "0", "output": "0"}}}',
])
def test_anything_else_is_one_typed_error(raw: str) -> None:
    with pytest.raises(EventMalformed) as caught:
        parse_event(raw)
    assert caught.value.error_code == "event_malformed"
    assert isinstance(caught.value, ValueError)
