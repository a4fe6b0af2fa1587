"""An embedder that iterates ``run_turn`` itself stops its turn with ``TurnEngine.stop``.

Written as an embedder would, from the README and docs/api.md only: the public API and
the emulators. Before, ``stop`` answered a turn iterated through ``run_turn`` with its
record (no error) and the turn ran on to ``turn_completed``: a stop silently ignored.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from turnstate import (
    AiohttpTransport,
    MemoryStore,
    Tool,
    ToolSpec,
    TurnEngine,
    TurnEvent,
    TurnInput,
)
from turnstate.emulators import EmulatedProviders
from turnstate.storage import TurnStatus
from turnstate.testing import emulated_providers  # noqa: F401  (the fixture)

NO_ARGS = {"type": "object", "properties": {}}


@pytest.fixture
async def engine(emulated_providers: EmulatedProviders) -> AsyncIterator[TurnEngine]:  # noqa: F811
    async with AiohttpTransport() as transport:
        yield TurnEngine(MemoryStore(), emulated_providers.adapters, transport)


def tool(handler: Any) -> tuple[Tool, ...]:
    return (Tool(spec=ToolSpec(name="slow", description="a slow tool", parameters=NO_ARGS),
                 handler=handler, timeout=60),)


async def quick(args: dict[str, Any]) -> dict[str, Any]:
    return {"ok": True}


async def check_stopped(engine: TurnEngine, chat_id: str, turn_id: str,
                        events: list[TurnEvent]) -> None:
    """The turn ended ``stopped`` with its final event; its record says so; the chat is
    free again."""
    assert events[-1].type == "turn_aborted"
    assert events[-1].reason == "stopped"  # type: ignore[union-attr]
    record = await engine.store.load_turn(turn_id)
    assert (record.status, record.reason) == (TurnStatus.ABORTED, "stopped")
    assert (await engine.store.load_chat(chat_id)).active_turn_id is None


@pytest.mark.parametrize("provider,model", [("openai", "gpt-4o"),
                                            ("anthropic", "claude-sonnet-4-5")])
async def test_a_stop_from_the_consumers_loop_ends_the_turn_stopped(
        engine: TurnEngine, provider: str, model: str) -> None:
    chat = await engine.store.create_chat(owner="alice")
    turn = TurnInput(provider=provider, model=model, system_prompt="s", turn_id="t-loop",
                     user_text="[[call:slow]] [[rounds:3]] go", tools=tool(quick))
    events: list[TurnEvent] = []
    async for event in engine.run_turn(chat.id, turn):
        events.append(event)
        if event.type == "tool_call":
            await engine.stop("t-loop")  # the user pressed stop; the loop goes on
    assert sum(e.type == "tool_call" for e in events) == 1  # nothing ran after the stop
    await check_stopped(engine, chat.id, "t-loop", events)


async def test_a_stop_from_another_task_interrupts_a_running_tool(engine: TurnEngine) -> None:
    started, cancelled = asyncio.Event(), asyncio.Event()

    async def stuck(args: dict[str, Any]) -> dict[str, Any]:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return {}  # pragma: no cover

    chat = await engine.store.create_chat(owner="alice")
    turn = TurnInput(provider="openai", model="gpt-4o", system_prompt="s", turn_id="t-tool",
                     user_text="[[call:slow]] go", tools=tool(stuck))

    async def consume() -> list[TurnEvent]:
        seen = [event async for event in engine.run_turn(chat.id, turn)]
        await asyncio.sleep(0)  # the consumer's task is not left cancelled
        return seen

    consumer = asyncio.create_task(consume())
    await started.wait()
    await engine.stop("t-tool")  # an HTTP handler of the embedder's, say
    events = await consumer
    assert cancelled.is_set()
    assert consumer.cancelling() == 0
    await check_stopped(engine, chat.id, "t-tool", events)


async def test_a_stop_mid_stream_keeps_the_text_streamed_so_far(
        engine: TurnEngine, emulated_providers: EmulatedProviders) -> None:  # noqa: F811
    chat = await engine.store.create_chat(owner="alice")
    words = "_".join(f"w{i}" for i in range(400))
    turn = TurnInput(provider="anthropic", model="claude-sonnet-4-5", system_prompt="s",
                     turn_id="t-text", user_text=f"[[say:{words}]] go")
    events: list[TurnEvent] = []
    async for event in engine.run_turn(chat.id, turn):
        events.append(event)
        if event.type == "text_delta" and len(events) < 50:
            await engine.stop("t-text")
    await check_stopped(engine, chat.id, "t-text", events)
    shown = "".join(e.text for e in events if e.type == "text_delta")  # type: ignore[union-attr]
    answer = (await engine.store.list_messages(chat.id))[-1]
    assert shown and answer.text().startswith(shown)


@pytest.mark.parametrize("provider,model", [
    ("openai", "gpt-4o"), ("gemini", "gemini-2.5-flash"), ("openai-compatible", "gpt-4o"),
    ("deepseek", "deepseek-chat"), ("anthropic", "claude-sonnet-4-5")])
async def test_a_stop_from_another_task_interrupts_the_stream(
        engine: TurnEngine, provider: str, model: str) -> None:
    """The consumer waits inside the turn (for the next chunk) when the stop comes: the
    provider call is interrupted, as a lost lease interrupts it."""
    chat = await engine.store.create_chat(owner="alice")
    words = "_".join(f"w{i}" for i in range(2000))
    turn = TurnInput(provider=provider, model=model, system_prompt="s", turn_id="t-stream",
                     user_text=f"[[say:{words}]] go")
    first = asyncio.Event()

    async def consume() -> list[TurnEvent]:
        seen = []
        async for event in engine.run_turn(chat.id, turn):
            seen.append(event)
            if event.type == "text_delta":
                first.set()
        return seen

    consumer = asyncio.create_task(consume())
    await first.wait()
    await engine.stop("t-stream")
    events = await consumer
    assert consumer.cancelling() == 0
    await check_stopped(engine, chat.id, "t-stream", events)
    shown = "".join(e.text for e in events if e.type == "text_delta")  # type: ignore[union-attr]
    assert len(shown.split()) < 2000  # cut short
    answer = (await engine.store.list_messages(chat.id))[-1]
    assert answer.text().startswith(shown)
