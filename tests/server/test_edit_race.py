"""An edit (``PATCH /api/chats/{id}/messages/{seq}``) that a turn overtakes is refused.

The route used to read the chat, check its lease itself, then call ``edit_message``: a
turn that took the chat between the check and the edit had its history changed under
it, and its commit ended ``commit_conflict``. The store's ``edit_message`` now refuses a
live lease in its own write (``ChatBusy``, a 409). The race is reproduced exactly: the
competing turn takes the chat at the last moment before the edit writes.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import pytest

from tests.server.support import Api
from turnstate.core._conversation import Part, TextPart
from turnstate.storage import TurnLease, TurnStart
from turnstate.testing._records import commit


async def texts(api: Api, chat: str) -> list[tuple[int, str, str]]:
    listed = await api.services.store.list_messages(chat)
    return [(m.seq, m.status.value, m.text()) for m in listed]


async def test_a_turn_that_takes_the_chat_before_the_edit_writes_keeps_its_history(
        api: Api, monkeypatch: pytest.MonkeyPatch) -> None:
    chat = await api.new_chat()
    await api.turn(chat, text="the question")
    before = await texts(api, chat)
    store = api.services.store
    edit: Callable[..., Awaitable[None]] = store.edit_message
    other: list[TurnLease] = []

    async def another_tab_first(chat_id: str, seq: int, parts: Sequence[Part],
                                **kwargs: Any) -> None:
        other.append(await store.begin_turn(chat_id, TurnStart(
            turn_id="other-tab", user_parts=(TextPart(text="from another tab"),),
            provider="openai", model="gpt-4o", lease_seconds=60)))
        await edit(chat_id, seq, parts, **kwargs)

    monkeypatch.setattr(store, "edit_message", another_tab_first)
    refused = await api.json("PATCH", f"/api/chats/{chat}/messages/1", status=409,
                             json={"text": "rewritten"})
    assert (refused["error"], other[0].turn_id) == ("chat_busy", "other-tab")
    assert (await texts(api, chat))[:2] == before  # the question is as it was
    done = await store.commit_turn(other[0], commit(None, parts=(TextPart(text="answer"),)))
    assert done.committed_seq == 4  # the overtaking turn commits: no conflict
    monkeypatch.undo()
    view = await api.json("PATCH", f"/api/chats/{chat}/messages/1", json={"text": "again"})
    assert view["messages"][0]["parts"][0]["text"] == "again"


async def test_the_edit_reads_no_chat_before_it_writes(
        api: Api, monkeypatch: pytest.MonkeyPatch) -> None:
    """The lease is the store's to check: the route no longer reads the chat for it."""
    chat = await api.new_chat()
    await api.turn(chat, text="the question")
    store = api.services.store
    calls: list[str] = []
    for name in ("load_chat", "load_messages", "edit_message"):
        method = getattr(store, name)

        async def counted(*args: Any, _name: str = name, _method: Any = method,
                          **kwargs: Any) -> Any:
            calls.append(_name)
            return await _method(*args, **kwargs)

        monkeypatch.setattr(store, name, counted)
    await api.json("PATCH", f"/api/chats/{chat}/messages/1", json={"text": "rewritten"})
    assert calls[:2] == ["load_messages", "edit_message"]
