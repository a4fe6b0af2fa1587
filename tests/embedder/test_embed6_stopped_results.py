"""A turn stopped or cancelled while its tool results stream keeps them (embed6).

``tools`` yielded each ``tool_result`` event before adding the results to the answer, so
an embedder that stopped the turn (``engine.stop`` from its loop, as a stop button does)
or left the loop at the first ``tool_result`` got an aborted answer whose tool calls had
no results: the calls had run (their side effects done), one result had been shown to
the user, and the record said neither."""

from __future__ import annotations

from contextlib import aclosing
from typing import Any

import pytest

from turnstate import (
    Tool,
    ToolCallPart,
    ToolResultPart,
    ToolSpec,
    TurnEngine,
    TurnInput,
)
from turnstate.testing import emulated_engine, emulated_providers

__all__ = ["emulated_engine", "emulated_providers"]  # the fixtures, imported for pytest


async def booked(args: dict[str, Any]) -> str:
    return "booked"


TOOLS = (Tool(spec=ToolSpec(name="book", description="Books a table",
                            parameters={"type": "object"}), handler=booked),)


@pytest.mark.parametrize("how", ["stop", "leave"])
@pytest.mark.parametrize("provider,model", [("anthropic", "claude-sonnet-4-5"),
                                            ("openai", "gpt-4o")])
async def test_the_aborted_answer_keeps_the_results_of_the_calls_that_ran(
        emulated_engine: TurnEngine, provider: str, model: str, how: str) -> None:
    chat = await emulated_engine.store.create_chat(owner="o")
    turn = TurnInput(provider=provider, model=model, system_prompt="s", tools=TOOLS,
                     user_text="[[call:book*2]] book twice", turn_id=f"t-{how}")
    seen = []
    async with aclosing(emulated_engine.run_turn(chat.id, turn)) as events:
        async for event in events:
            seen.append(event.type)
            if event.type == "tool_result":
                if how == "leave":
                    break
                await emulated_engine.stop(f"t-{how}")
    assert seen.count("tool_result") == 1
    answer = (await emulated_engine.store.list_messages(chat.id))[-1]
    assert answer.status.value == "aborted"
    calls = [p for p in answer.parts if isinstance(p, ToolCallPart)]
    results = [p for p in answer.parts if isinstance(p, ToolResultPart)]
    assert len(calls) == 2
    assert [r.call_id for r in results] == [c.call_id for c in calls]
    assert all(r.output == "booked" and not r.is_error for r in results)
