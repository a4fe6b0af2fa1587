"""An embedder's own pytest on ``turnstate.testing`` alone, type-checked with ``mypy
--strict`` by ``test_typed_program.py`` (embed5). Before, expiring the stored cursor, the
degradation path a backend most needs to test, was a strict-mode error:
``emulators["openai"]`` is typed as the emulators' base class, which has no ``expire``
(the package's own tests silenced it with ``type: ignore``); ``chained(provider)`` gives
the cursor-keeping emulator typed. The followed events read back typed with
``parse_event``."""

from __future__ import annotations

import pytest

from turnstate import ConfigurationError, TurnEngine, TurnInput, parse_envelope, parse_event
from turnstate.testing import (
    ChainedEmulator,
    EmulatedProviders,
    Reply,
    emulated_engine,
    emulated_providers,
    turn_events,
)

__all__ = ["emulated_engine", "emulated_providers"]  # the fixtures, imported for pytest


@pytest.mark.parametrize(("provider", "model"), [("openai", "gpt-4o"),
                                                  ("gemini", "gemini-2.5-flash")])
async def test_an_expired_cursor_degrades_to_a_replay(
        emulated_engine: TurnEngine, emulated_providers: EmulatedProviders, provider: str,
        model: str) -> None:
    chat = await emulated_engine.store.create_chat(owner="me")
    turn = TurnInput(provider=provider, model=model, system_prompt="s", user_text="one")
    await turn_events(emulated_engine.run_turn(chat.id, turn))
    stored = (await emulated_engine.store.load_chat(chat.id)).last_provider_state
    cursor = parse_envelope(stored or "").cursor
    emulator: ChainedEmulator = emulated_providers.chained(provider)
    assert cursor is not None and emulator.stored(cursor)
    emulator.expire(cursor)
    emulator.model.push(Reply(text="after the loss"))
    live = await emulated_engine.start_turn(
        chat.id, TurnInput(provider=provider, model=model, system_prompt="s",
                           user_text="two"))
    following = await emulated_engine.follow(chat.id, live.turn_id)
    events = [parse_event(logged.data) async for logged in following.events]
    assert [e.reason for e in events if e.type == "continuation_degraded"] == [
        "cursor_expired"]
    final = events[-1]
    assert final.type == "turn_completed" and final.text == "after the loss"


def test_a_stateless_provider_has_no_chained_emulator() -> None:
    with pytest.raises(ConfigurationError):
        EmulatedProviders().chained("anthropic")
