"""``TurnInput.tool_iteration_limit`` as docs/api.md now states it (embed6: the field, its
default and its end were in no doc an embedder reads)."""

from __future__ import annotations

from typing import Any

import pytest

from turnstate import Tool, ToolSpec, TurnEngine, TurnInput
from turnstate.testing import emulated_engine, emulated_providers, turn_events

__all__ = ["emulated_engine", "emulated_providers"]  # the fixtures, imported for pytest


async def noop(args: dict[str, Any]) -> str:
    return "done"


TOOLS = (Tool(spec=ToolSpec(name="t", parameters={"type": "object"}), handler=noop),)


def test_the_default_is_eight() -> None:
    assert TurnInput(provider="openai", model="gpt-4o", system_prompt="",
                     user_text="x").tool_iteration_limit == 8


@pytest.mark.parametrize(("limit", "rounds", "ran", "end"), [
    (0, 1, 0, "turn_aborted"), (1, 1, 1, "turn_completed"), (1, 2, 1, "turn_aborted")])
async def test_one_iteration_more_than_the_limit_aborts_the_turn(
        emulated_engine: TurnEngine, limit: int, rounds: int, ran: int, end: str) -> None:
    chat = await emulated_engine.store.create_chat(owner="o")
    turn = TurnInput(provider="anthropic", model="claude-sonnet-4-5", system_prompt="s",
                     user_text=f"[[call:t]] [[rounds:{rounds}]] go", tools=TOOLS,
                     tool_iteration_limit=limit)
    events = await turn_events(emulated_engine.run_turn(chat.id, turn))
    assert sum(e.type == "tool_result" for e in events) == ran
    final = events[-1]
    assert final.type == end
    if final.type == "turn_aborted":
        assert final.reason == "tool_iteration_limit"
