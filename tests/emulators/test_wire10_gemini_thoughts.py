"""The Gemini Interactions emulator opens every interaction with a thought step carrying
its signature alone, as every recording of gemini-2.5-flash asked nothing about thoughts
does (``basic``, ``tool-call-step1``, ...); it sent thought steps only for ``[[think]]``.
The parser keeps such a step as a ``ReasoningPart`` with the signature and no text, (wire10)."""

from __future__ import annotations

from turnstate import TurnEngine, TurnInput
from turnstate.core._conversation import ReasoningPart
from turnstate.emulators import EmulatedProviders
from turnstate.testing import emulated_engine, emulated_providers, turn_events

__all__ = ["emulated_engine", "emulated_providers"]  # the fixtures, imported for pytest


async def test_a_plain_answer_keeps_the_thought_signature(
        emulated_engine: TurnEngine, emulated_providers: EmulatedProviders) -> None:
    store = emulated_engine.store
    chat = await store.create_chat(owner="o")
    turn = TurnInput(provider="gemini", model="gemini-2.5-flash", system_prompt="s",
                     user_text="hi")
    assert (await turn_events(emulated_engine.run_turn(chat.id, turn)))[-1].type == \
        "turn_completed"
    answer = (await store.load_history(chat.id))[-1]
    thoughts = [p for p in answer.parts if isinstance(p, ReasoningPart)]
    assert len(thoughts) == 1 and thoughts[0].text == "" and thoughts[0].signature
    again = TurnInput(provider="gemini", model="gemini-2.5-flash", system_prompt="s",
                      user_text="again")
    assert (await turn_events(emulated_engine.run_turn(chat.id, again)))[-1].type == \
        "turn_completed"
