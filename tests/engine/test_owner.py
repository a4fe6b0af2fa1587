"""Ownership at the engine boundary: ``TurnInput.owner`` reaches the store."""

from __future__ import annotations

import pytest

from tests.engine.support import Env, collect, make_turn
from turnstate.core._errors import ChatNotFound


async def test_another_owners_chat_is_not_found_before_anything_happens(env: Env) -> None:
    """A foreign owner gets ChatNotFound: no event, no provider request, no lease."""
    chat = await env.store.load_chat(env.chat_id)
    with pytest.raises(ChatNotFound) as raised:
        await collect(env.engine.run_turn(env.chat_id, make_turn(owner="mallory")))
    assert raised.value.chat_id == env.chat_id
    assert env.backend.requests == []
    assert await env.store.load_chat(env.chat_id) == chat
    assert await env.store.list_messages(env.chat_id) == ()


async def test_the_owner_runs_turns(env: Env) -> None:
    chat = await env.store.load_chat(env.chat_id)
    outcome = await env.turn(owner=chat.owner)
    assert outcome.committed
    assert len(await env.store.list_messages(env.chat_id, owner=chat.owner)) == 2
