"""``TurnInput.replace_from``: an "edit and regenerate" whose cut is the turn's own begin.

The field is checked when the input is built (``InvalidInput`` naming it, before any
lease), and the engine carries it into ``TurnStart``: the store deletes the messages from
that seq on in the write that takes the lease, and the turn answers from what is left.
"""

from __future__ import annotations

from typing import Any

import attrs
import pytest

from tests.engine.support import Env, make_turn
from turnstate.core import InvalidInput
from turnstate.core._errors import ChatBusy, MessageNotFound
from turnstate.storage import TurnStart


@pytest.mark.parametrize("value", [0, -3, True, False, 2.0, "3", [3]])
def test_a_replace_from_that_is_not_a_positive_int_is_refused(value: Any) -> None:
    with pytest.raises(InvalidInput) as caught:
        make_turn("again", replace_from=value)
    assert caught.value.field == "replace_from"
    assert repr(value) in caught.value.problem


async def test_the_turn_replaces_the_tail_in_its_begin(env: Env) -> None:
    assert (await env.turn("first")).committed
    assert (await env.turn("second")).committed
    before = await env.store.load_chat(env.chat_id)
    assert before.last_provider_state is not None
    outcome = await env.turn("second, edited", replace_from=3)
    assert outcome.committed
    messages = await env.store.list_messages(env.chat_id)
    assert [m.seq for m in messages] == [1, 2, 3, 4]
    assert [m.text() for m in messages if m.role.value == "user"] == ["first",
                                                                      "second, edited"]
    # the cursor went with the cut: the turn replayed the history left
    assert outcome.states[:2] == ["validate", "replay"]
    assert (await env.store.load_chat(env.chat_id)).version == before.version + 2
    assert (await env.store.list_turns(env.chat_id))[1].assistant_message_id is None


async def test_a_refused_replacing_turn_deletes_nothing(env: Env) -> None:
    assert (await env.turn("first")).committed
    messages = await env.store.list_messages(env.chat_id)
    with pytest.raises(MessageNotFound):
        await env.turn("again", replace_from=9)
    lease = await env.store.begin_turn(env.chat_id, TurnStart(
        turn_id="other", user_parts=messages[0].parts, provider="openai", model="gpt-4o",
        lease_seconds=60))
    with pytest.raises(ChatBusy):
        await env.turn("again", replace_from=1)
    assert (await env.store.list_messages(env.chat_id))[:2] == messages
    assert lease.user_seq == 3


class _IgnoresReplaceFrom:
    """A store written before ``replace_from``: its begin stores the question after the
    messages it was to replace (the field dropped on the way in)."""

    def __init__(self, store: Any) -> None:
        self._store = store

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    async def begin_turn(self, chat_id: str, start: TurnStart, **kwargs: Any) -> Any:
        return await self._store.begin_turn(chat_id, attrs.evolve(start, replace_from=None),
                                            **kwargs)


async def test_a_store_that_ignores_replace_from_aborts_the_turn_it_leased(env: Env) -> None:
    """The engine sees the question stored past ``replace_from`` and aborts the turn
    (recorded, lease given back) instead of answering as if the tail had been cut."""
    assert (await env.turn("first")).committed
    calls = len(env.backend.requests)
    env.engine.store = _IgnoresReplaceFrom(env.store)
    outcome = await env.turn("first, edited", replace_from=1)
    aborted = outcome.of_type("turn_aborted")
    assert [e.reason for e in aborted] == ["internal_error"]
    assert "ignored replace_from=1" in aborted[0].detail
    assert len(env.backend.requests) == calls  # no provider call
    chat = await env.store.load_chat(env.chat_id)
    assert chat.active_turn_id is None
    assert [m.status.value for m in await env.store.list_messages(env.chat_id)][2:] == [
        "aborted", "aborted"]
