"""What leaving a ``run_turn`` loop early does to the lease, the stored answer and the bill.

An embedder's client disconnects mid-answer (its handler's task is cancelled, or it
``break``s / ``aclose()``s the iterator), or a user presses stop (``TurnEngine.stop``).
Written from the README and docs/api.md only. Before: a cancelled answer was stored
empty although its text had streamed to the user (a stopped one kept it), and a turn cut
during its second request kept the first request's cost as the turn's cost (its audit's
``costUsd``, ``TurnAborted.stats.cost``), as if the cut request had cost nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from turnstate import (
    AiohttpTransport,
    MemoryStore,
    Tool,
    ToolSpec,
    TurnAborted,
    TurnEngine,
    TurnEvent,
    TurnInput,
    message_cost,
)
from turnstate.emulators import EmulatedProviders, Fault
from turnstate.storage import TurnStatus
from turnstate.testing import emulated_providers  # noqa: F401  (the fixture)

WORDS = "_".join(f"w{i}" for i in range(300))
MODELS = [("openai", "gpt-4o"), ("gemini", "gemini-2.5-flash"),
          ("openai-compatible", "gpt-4o"), ("deepseek", "deepseek-chat"),
          ("anthropic", "claude-sonnet-4-5")]


@pytest.fixture
async def engine(emulated_providers: EmulatedProviders) -> AsyncIterator[TurnEngine]:  # noqa: F811
    async with AiohttpTransport() as transport:
        yield TurnEngine(MemoryStore(), emulated_providers.adapters, transport)


async def lookup(args: dict[str, Any]) -> dict[str, Any]:
    return {"found": True}


TOOLS = (Tool(spec=ToolSpec(name="lookup", description="look it up",
                            parameters={"type": "object", "properties": {}}),
              handler=lookup),)


@pytest.mark.parametrize("provider,model", MODELS)
@pytest.mark.parametrize("how", ["aclose", "task"])
async def test_a_disconnect_mid_answer_keeps_what_was_shown_and_frees_the_chat(
        engine: TurnEngine, provider: str, model: str, how: str) -> None:
    chat = await engine.store.create_chat(owner="alice")
    first = TurnInput(provider=provider, model=model, system_prompt="s", user_text="hello")
    assert [e async for e in engine.run_turn(chat.id, first)][-1].type == "turn_completed"
    cursor = (await engine.store.load_chat(chat.id)).last_provider_state
    shown: list[str] = []
    turn = TurnInput(provider=provider, model=model, system_prompt="s", turn_id="t-cut",
                     user_text=f"[[say:{WORDS}]] talk")
    if how == "aclose":
        events = engine.run_turn(chat.id, turn)
        async for event in events:
            if event.type == "text_delta":
                shown.append(event.text)
                if len(shown) == 3:
                    break
        await events.aclose()  # type: ignore[attr-defined]
    else:
        three = asyncio.Event()

        async def consume() -> None:
            # aclosing: a failure or a cancel in the loop's own body (a socket write)
            # closes the iterator at once, not when it is garbage-collected
            async with contextlib.aclosing(engine.run_turn(chat.id, turn)) as events:
                async for event in events:
                    if event.type == "text_delta":
                        shown.append(event.text)
                        if len(shown) == 3:
                            three.set()
                            await asyncio.Event().wait()  # writing to a slow client

        task = asyncio.create_task(consume())
        await three.wait()
        task.cancel()  # the client went away
        with pytest.raises(asyncio.CancelledError):
            await task
    record = await engine.store.load_turn("t-cut")
    assert (record.status, record.reason) == (TurnStatus.ABORTED, "cancelled")
    stored = await engine.store.load_chat(chat.id)
    assert stored.active_turn_id is None
    assert stored.last_provider_state == cursor  # an aborted turn never moves the cursor
    answer = (await engine.store.list_messages(chat.id))[-1]
    # what was shown, and the rest of the chunk it came in (streamed, not yet yielded)
    assert answer.text().startswith("".join(shown)) and shown
    after = TurnInput(provider=provider, model=model, system_prompt="s", user_text="again")
    finals = [e async for e in engine.run_turn(chat.id, after)]
    assert finals[-1].type == "turn_completed"
    assert not [e for e in finals if e.type == "continuation_degraded"]


@pytest.mark.parametrize("provider,model", [("openai", "gpt-4o"),
                                            ("anthropic", "claude-sonnet-4-5")])
async def test_a_request_cut_in_flight_leaves_the_turns_cost_unknown(
        engine: TurnEngine, emulated_providers: EmulatedProviders,  # noqa: F811
        provider: str, model: str) -> None:
    """The first request (the tool call) was answered and priced; the second is stopped
    mid-stream: the provider bills some of it. Anthropic's ``message_start`` said its
    input, so the cost is known (a floor: the output is an estimate over what streamed);
    OpenAI said nothing before its end, so the cost is unknown. The second answer stalls
    after its first deltas (its end never comes before the stop): on a loaded machine
    the whole answer could arrive in the chunk that held the first delta, and the
    stop then came after a complete, priced request (no cut: a flaky test)."""
    emulated_providers.emulators[provider].faults.push(Fault(), Fault(stall_after=6))
    chat = await engine.store.create_chat(owner="alice")
    turn = TurnInput(provider=provider, model=model, system_prompt="s", turn_id="t-bill",
                     user_text=f"[[call:lookup]] [[say:{WORDS}]] go", tools=TOOLS)
    events: list[TurnEvent] = []
    async for event in engine.run_turn(chat.id, turn):
        events.append(event)
        if event.type == "text_delta" and any(e.type == "tool_result" for e in events):
            await engine.stop("t-bill")
    final = events[-1]
    assert isinstance(final, TurnAborted) and final.reason == "stopped"
    assert final.stats.requests == 2 and final.stats.usage.input_tokens > 0
    answer = (await engine.store.list_messages(chat.id))[-1]
    assert answer.usage is not None and answer.usage.input_tokens > 0  # what is known
    audit = json.loads(answer.provider_state or "{}")
    assert audit["metadata"]["cutRequests"] == 1
    if provider == "anthropic":  # message_start said the cut request's input: billed
        assert final.stats.cost is not None and "usageMissing" not in audit["metadata"]
        assert message_cost(answer) is not None
    else:  # nothing said before the end: unknown, not the first request's cost alone
        assert final.stats.cost is None and audit["metadata"]["usageMissing"] is True
        assert message_cost(answer) is None


async def test_a_stop_between_requests_keeps_the_known_cost(engine: TurnEngine) -> None:
    """Stopped while its tool runs, no request is in flight: the bill is whole."""
    running = asyncio.Event()

    async def stuck(args: dict[str, Any]) -> dict[str, Any]:
        running.set()
        await asyncio.Event().wait()
        return {}  # pragma: no cover

    tools = (Tool(spec=TOOLS[0].spec, handler=stuck),)
    chat = await engine.store.create_chat(owner="alice")
    turn = TurnInput(provider="openai", model="gpt-4o", system_prompt="s", turn_id="t-whole",
                     user_text="[[call:lookup]] go", tools=tools)

    async def consume() -> list[TurnEvent]:
        return [event async for event in engine.run_turn(chat.id, turn)]

    consumer = asyncio.create_task(consume())
    await running.wait()
    await engine.stop("t-whole")
    final = (await consumer)[-1]
    assert isinstance(final, TurnAborted) and final.reason == "stopped"
    assert final.stats.cost is not None and final.stats.cost.total > 0
    answer = (await engine.store.list_messages(chat.id))[-1]
    assert message_cost(answer) == final.stats.cost
