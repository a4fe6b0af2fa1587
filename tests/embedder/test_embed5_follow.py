"""``follow``'s checks on a detached turn running here (embed5). Before: (1) a turn
started without ``TurnInput.owner`` (the owner given to the store calls, ``follow`` and
``stop`` instead) was followed by any owner who named its chat and turn id, running or
just ended (``stop`` of the same turn by that owner was refused, ``TurnNotFound``);
(2) a negative ``after`` answered with the notice ``log_truncated``, as if events had
been lost, and an ``after`` that is no ``int`` (a header's text) with a bare
``TypeError``."""

from __future__ import annotations

import asyncio

import pytest

from turnstate import InvalidInput, TurnEngine, TurnInput, TurnNotFound
from turnstate.emulators import EmulatedProviders
from turnstate.testing import Fault, emulated_engine, emulated_providers

__all__ = ["emulated_engine", "emulated_providers"]  # the fixtures, imported for pytest


def _turn(owner: str | None) -> TurnInput:
    return TurnInput(provider="openai", model="gpt-4o", system_prompt="s",
                     user_text="hello", owner=owner)


@pytest.mark.parametrize("turn_owner", [None, "alice"])
async def test_another_owner_cannot_follow_the_turn(
        emulated_engine: TurnEngine, emulated_providers: EmulatedProviders,
        turn_owner: str | None) -> None:
    chat = await emulated_engine.store.create_chat(owner="alice")
    held = asyncio.Event()
    emulated_providers.emulators["openai"].faults.push(Fault(gate=held))
    live = await emulated_engine.start_turn(chat.id, _turn(turn_owner))
    with pytest.raises(TurnNotFound):  # running
        await emulated_engine.follow(chat.id, live.turn_id, owner="mallory")
    held.set()
    following = await emulated_engine.follow(chat.id, live.turn_id, owner="alice")
    assert [e.type async for e in following.events][-1] == "turn_completed"
    with pytest.raises(TurnNotFound):  # ended, still held here
        await emulated_engine.follow(chat.id, live.turn_id, owner="mallory")


@pytest.mark.parametrize("after", [-1, "3", 2.5, True])
async def test_an_after_that_is_no_event_id_is_refused(
        emulated_engine: TurnEngine, after: object) -> None:
    chat = await emulated_engine.store.create_chat(owner="alice")
    live = await emulated_engine.start_turn(chat.id, _turn("alice"))
    with pytest.raises(InvalidInput) as caught:
        await emulated_engine.follow(chat.id, live.turn_id, after=after)  # type: ignore[arg-type]
    assert caught.value.field == "after"
    following = await emulated_engine.follow(chat.id, live.turn_id)
    assert following.notice is None
    assert [e.type async for e in following.events][-1] == "turn_completed"
