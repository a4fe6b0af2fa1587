"""``turnstate.testing.emulated_engine`` and ``turn_events``: an embedder's own test of a
turn in three lines (embedder2). Before, each embedder built the transport, the store
and the engine itself and collected events without closing the iterator."""

from __future__ import annotations

from turnstate import TurnEngine, TurnInput
from turnstate.testing import (  # noqa: F401  (the fixtures)
    EmulatedProviders,
    Fault,
    emulated_engine,
    emulated_providers,
    turn_events,
)


async def test_a_turn_against_the_emulated_engine(
        emulated_engine: TurnEngine) -> None:  # noqa: F811
    chat = await emulated_engine.store.create_chat(owner="me")
    events = await turn_events(emulated_engine.run_turn(chat.id, TurnInput(
        provider="openai", model="gpt-4o", system_prompt="Be brief.", user_text="hi")))
    assert events[-1].type == "turn_completed"


async def test_faults_queued_on_the_same_tests_emulators_reach_the_engine(
        emulated_engine: TurnEngine,  # noqa: F811
        emulated_providers: EmulatedProviders,  # noqa: F811
) -> None:
    emulated_providers.emulators["openai"].faults.push(Fault(status=503, body={}))
    chat = await emulated_engine.store.create_chat(owner="me")
    events = await turn_events(emulated_engine.run_turn(chat.id, TurnInput(
        provider="openai", model="gpt-4o", system_prompt="Be brief.", user_text="hi")))
    assert events[-1].type == "turn_completed"  # retried at once (no sleep)
    assert len(emulated_providers.emulators["openai"].requests) == 2
