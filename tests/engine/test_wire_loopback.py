"""Wire fidelity, round three (issue 24) over loopback: whole turns against emulators
that stream the shapes of items 2, 3 and 6 and enforce what the live APIs enforce.

* item 2: Anthropic ends a stream with ``max_tokens`` inside a ``tool_use`` whose input
  is incomplete, and refuses that call (or its result) in any later request;
* item 3: Gemini's OpenAI-compatible endpoint streams calls with ``"id": ""`` and no
  ``index``; the Chat Completions emulator refuses an empty replayed id and a result
  whose id no call of the assistant message carries;
* item 6: OpenRouter, Groq and gpt-oss servers stream ``delta.reasoning``; Groq refuses
  ``reasoning_content`` sent back;
* a saturated connection pool fails the turn after ``PoolLimits.wait_seconds``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.engine.support import Outcome, collect, make_turn
from turnstate.core._conversation import ReasoningPart, TextPart, ToolCallPart, ToolResultPart
from turnstate.core._events import TurnAborted, TurnCompleted
from turnstate.emulators import EmulatedProviders, Fault, Reply, ScriptedCall
from turnstate.engine import TurnEngine
from turnstate.providers import PoolLimits
from turnstate.providers._transport import AiohttpTransport, RetryPolicy
from turnstate.storage import MemoryStore, decode_audit

OSLO = ScriptedCall(name="weather", arguments='{"city": "Oslo"}')
ROME = ScriptedCall(name="weather", arguments='{"city": "Rome"}')


class Live:
    def __init__(self, stack: EmulatedProviders, engine: TurnEngine, store: MemoryStore,
                 chat_id: str) -> None:
        self.stack, self.engine, self.store, self.chat_id = stack, engine, store, chat_id

    async def turn(self, text: str, provider: str, model: str) -> Outcome:
        return await collect(self.engine.run_turn(self.chat_id, make_turn(
            text, provider=provider, model=model)))

    def emulator(self, provider: str) -> Any:
        return self.stack.emulators[provider]

    def sent(self, provider: str) -> list[dict[str, Any]]:
        return [r.json for r in self.emulator(provider).requests]

    async def last_message_parts(self) -> tuple[Any, ...]:
        return (await self.store.load_history(self.chat_id))[-1].parts

    async def audit_metadata(self) -> dict[str, Any]:
        last = (await self.store.load_history(self.chat_id))[-1]
        assert last.provider_state is not None
        return dict(decode_audit(last.provider_state).metadata or {})


@pytest.fixture
async def live() -> AsyncIterator[Live]:
    providers = ("anthropic", "openai-compatible", "deepseek")
    async with EmulatedProviders(providers) as stack, \
            AiohttpTransport(retry=RetryPolicy(max_attempts=1)) as transport:
        store = MemoryStore()
        chat = await store.create_chat(owner="o")
        yield Live(stack, TurnEngine(store, stack.adapters, transport), store, chat.id)


def _completed(outcome: Outcome) -> TurnCompleted:
    assert isinstance(outcome.final, TurnCompleted), outcome.final
    return outcome.final


# --- item 2: Anthropic max_tokens inside a tool call --------------------------------------


async def test_anthropic_cut_tool_call_keeps_the_text_and_the_next_turn_is_accepted(
    live: Live,
) -> None:
    emulator = live.emulator("anthropic")
    emulator.model.push(Reply(text="Let me look that up.", calls=(OSLO,), truncated=True,
                              partial_call=True))
    outcome = await live.turn("weather in Oslo?", "anthropic", "claude-sonnet-4-5")
    final = _completed(outcome)
    (cut,) = emulator.incomplete
    assert (final.finish_reason, final.finish_reason_raw) == ("length", "max_tokens")
    assert final.text == "Let me look that up."
    assert "".join(e.text for e in outcome.of_type("text_delta")) == final.text
    assert (final.stats.tool_calls, final.stats.requests) == (0, 1)
    assert await live.last_message_parts() == (TextPart(text="Let me look that up."),)
    assert (await live.audit_metadata())["droppedToolCalls"] == [
        {"id": cut, "name": "weather", "reason": "max_tokens"}]
    again = await live.turn("and tomorrow?", "anthropic", "claude-sonnet-4-5")
    assert _completed(again).finish_reason == "stop"
    assert cut not in json.dumps(live.sent("anthropic")[-1])


# --- item 3: calls with an empty id and no index ------------------------------------------


async def test_gemini_openai_calls_without_ids_get_ids_that_round_trip(live: Live) -> None:
    outcome = await live.turn('[[call:weather {"city": "Oslo"}]] [[call:weather '
                              '{"city": "Rome"}]] weather?', "openai-compatible",
                              "gemini-2.5-flash")
    final = _completed(outcome)
    assert final.finish_reason == "stop" and final.stats.tool_calls == 2
    _, loop = live.sent("openai-compatible")
    parts = await live.last_message_parts()
    calls = [p for p in parts if isinstance(p, ToolCallPart)]
    results = [p for p in parts if isinstance(p, ToolResultPart)]
    ids = [c.call_id for c in calls]
    assert all(ids) and len(set(ids)) == 2
    assert [r.call_id for r in results] == ids
    assert [json.loads(c.arguments)["city"] for c in calls] == ["Oslo", "Rome"]
    assistant, *tools = loop["messages"][-3:]
    assert [c["id"] for c in assistant["tool_calls"]] == ids
    assert [t["tool_call_id"] for t in tools] == ids
    again = await live.turn("thanks", "openai-compatible", "gemini-2.5-flash")
    replayed = json.dumps(live.sent("openai-compatible")[-1])
    assert _completed(again) and all(i in replayed for i in ids)


# --- item 6: delta.reasoning ----------------------------------------------------------------


async def test_delta_reasoning_streams_is_stored_and_is_not_sent_back(live: Live) -> None:
    outcome = await live.turn("[[think]] [[call:weather]] weather?", "openai-compatible",
                              "openai/gpt-oss-120b")
    final = _completed(outcome)
    deltas = outcome.of_type("reasoning_delta")
    assert deltas and final.stats.tool_calls == 1
    reasoning = [p for p in await live.last_message_parts() if isinstance(p, ReasoningPart)]
    assert [p.kind for p in reasoning] == ["reasoning", "reasoning"]  # one per round
    assert "".join(d.text for d in deltas) == "".join(p.text for p in reasoning)
    assert reasoning[0].text.startswith("Thinking about")
    again = await live.turn("and now?", "openai-compatible", "openai/gpt-oss-120b")
    assert _completed(again)
    for body in live.sent("openai-compatible")[1:]:
        assistant = [m for m in body["messages"] if m["role"] == "assistant"]
        assert assistant and not any({"reasoning", "reasoning_content"} & m.keys()
                                     for m in assistant)


# --- a saturated connection pool ------------------------------------------------------------


async def test_a_saturated_pool_aborts_the_turn_with_a_retryable_pool_failure() -> None:
    """A one-connection pool held by one chat's turn: another chat's turn waits
    ``PoolLimits.wait_seconds`` and aborts ``provider_failed``, its failure
    ``pool_exhausted`` and retryable; the first turn completes."""
    async with EmulatedProviders(["openai-compatible"]) as stack, AiohttpTransport(
            pool=PoolLimits(per_host=1, wait_seconds=0.1)) as transport:
        emulator = stack.emulators["openai-compatible"]
        gate, arrived = asyncio.Event(), asyncio.Event()
        emulator.faults.push(Fault(gate=gate))
        received = emulator.record

        async def record(request: Any) -> Any:
            arrived.set()
            return await received(request)

        emulator.record = record  # type: ignore[method-assign]
        store = MemoryStore()
        engine = TurnEngine(store, stack.adapters, transport)
        first, second = [await store.create_chat(owner="o") for _ in range(2)]
        turn = make_turn("hello", provider="openai-compatible", model="gpt-4o-mini")
        holding = asyncio.create_task(collect(engine.run_turn(first.id, turn)))
        await arrived.wait()
        async with asyncio.timeout(10):
            refused = await collect(engine.run_turn(second.id, turn))
        gate.set()
        held = await holding
    assert isinstance(refused.final, TurnAborted) and refused.final.reason == "provider_failed"
    failure = refused.final.failure
    assert failure is not None
    assert (failure.error_type, failure.retryable, failure.code, failure.status) == (
        "pool_exhausted", True, "pool_exhausted", None)
    assert isinstance(held.final, TurnCompleted) and len(emulator.requests) == 1
