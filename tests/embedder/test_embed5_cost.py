"""Whether a chat's cost is whole (embed5). ``chat_cost`` sums the answers whose bill is
known and leaves out those it is not (a request cut in flight: ``usageMissing``), so an
embedder showing it showed a floor as the total with no way to tell: the count the
reference server shows (``costUnknownTurns``) was private to ``server._views``. It is
``turnstate.cost_unknown_turns`` now, on ``Message``s and lean messages alike."""

from __future__ import annotations

from turnstate import (
    TurnEngine,
    TurnInput,
    chat_cost,
    cost_unknown_turns,
    message_cost,
)
from turnstate.emulators import EmulatedProviders
from turnstate.testing import Fault, emulated_engine, emulated_providers, turn_events

__all__ = ["emulated_engine", "emulated_providers"]  # the fixtures, imported for pytest


async def test_a_cut_answer_makes_the_chat_s_cost_a_floor_and_says_so(
        emulated_engine: TurnEngine, emulated_providers: EmulatedProviders) -> None:
    store = emulated_engine.store
    chat = await store.create_chat(owner="o")

    def turn(text: str) -> TurnInput:
        return TurnInput(provider="openai", model="gpt-4o", system_prompt="s", user_text=text)

    await turn_events(emulated_engine.run_turn(chat.id, turn("one")))
    whole = await store.list_messages(chat.id)
    assert cost_unknown_turns(whole) == 0 and chat_cost(whole) is not None
    emulated_providers.emulators["openai"].faults.push(Fault(cut_after=6))
    events = await turn_events(emulated_engine.run_turn(chat.id, turn("two, a long answer")))
    assert events[-1].type == "turn_aborted" and events[-1].stats.cost is None
    messages = await store.list_messages(chat.id)
    assert message_cost(messages[-1]) is None
    assert chat_cost(messages) == chat_cost(whole)  # the cut turn is not in the sum
    assert cost_unknown_turns(messages) == 1  # and this says the sum is a floor
    assert cost_unknown_turns(await store.list_messages_lean(chat.id)) == 1
