"""An answer edited so a tool call lost its result (or a result its call) no longer breaks
every later turn of the chat (embed6).

``edit_message`` takes any parts. An embedder that let a user edit an answer and kept its
tool call but not the result (or the reverse) left a history every provider refuses with
a 400 (a ``tool_use`` without its ``tool_result``, a ``function_call`` without its output):
the next turn aborted ``provider_failed`` on all five providers, and so did every one after
it. A replay now leaves the unpaired part out of the request, the store keeps the message
as edited, and the audit counts what was left out (``unpairedToolParts``)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from turnstate import (
    TextPart,
    Tool,
    ToolCallPart,
    ToolResultPart,
    ToolSpec,
    TurnEngine,
    TurnInput,
)
from turnstate.core._tool_pairs import paired_history
from turnstate.emulators import EmulatedProviders
from turnstate.testing import emulated_engine, emulated_providers, turn_events

__all__ = ["emulated_engine", "emulated_providers"]  # the fixtures, imported for pytest

MODELS = {"openai": "gpt-4o", "anthropic": "claude-sonnet-4-5", "gemini": "gemini-2.5-flash",
          "openai-compatible": "gpt-4o", "deepseek": "deepseek-chat"}


async def lookup(args: dict[str, Any]) -> str:
    return "found"


TOOLS = (Tool(spec=ToolSpec(name="lookup", parameters={"type": "object"}), handler=lookup),)


@pytest.mark.parametrize("keep", [ToolCallPart, ToolResultPart])
@pytest.mark.parametrize("provider", sorted(MODELS))
async def test_a_turn_after_an_edit_that_unpaired_a_tool_call_completes(
        emulated_engine: TurnEngine, emulated_providers: EmulatedProviders,
        provider: str, keep: type) -> None:
    store = emulated_engine.store
    chat = await store.create_chat(owner="o")
    first = TurnInput(provider="anthropic", model="claude-sonnet-4-5", system_prompt="s",
                      user_text="[[call:lookup]] go", tools=TOOLS)
    assert (await turn_events(emulated_engine.run_turn(chat.id, first)))[-1].type \
        == "turn_completed"
    answer = (await store.list_messages(chat.id))[1]
    kept = next(p for p in answer.parts if isinstance(p, keep))
    await store.edit_message(chat.id, answer.seq, (kept, TextPart(text="edited answer")))
    turn = TurnInput(provider=provider, model=MODELS[provider], system_prompt="s",
                     user_text="next", tools=TOOLS)
    events = await turn_events(emulated_engine.run_turn(chat.id, turn))
    assert events[-1].type == "turn_completed", events[-1]
    body = emulated_providers.emulators[provider].requests[-1].body.decode()
    assert kept.call_id not in body and "edited answer" in body
    messages = await store.list_messages(chat.id)
    assert messages[1].parts == (kept, TextPart(text="edited answer"))  # stored as edited
    audit = json.loads(messages[-1].provider_state or "{}")
    assert audit["metadata"]["unpairedToolParts"] == 1


def test_a_history_of_paired_calls_is_sent_as_it_is() -> None:
    assert paired_history(()) == ((), 0)
