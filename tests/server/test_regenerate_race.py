"""A regenerate that loses its chat to another turn keeps the question it would ask again.

``POST /api/ui-messages`` with ``trigger: regenerate-message`` used to delete the last
stored question (``delete_messages_from``) and then begin the turn: a turn of another
tab (or of another server process, on PostgreSQL) that took the chat between the two
made the regenerate fail with ``ChatBusy`` after the question was already gone. The
question is now cut by the turn's own begin (``TurnInput.replace_from``), in the write
that takes the chat. The race is reproduced exactly: the competing turn takes the chat
at the last moment before the regenerate's begin writes (in the old code, after the
delete).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from tests.server.support import Api
from tests.server.test_hunt_regenerate import regenerate
from turnstate.core._conversation import TextPart
from turnstate.storage import TurnAbort, TurnLease, TurnStart


async def messages(api: Api, chat: str) -> list[tuple[int, str, str, str]]:
    listed = await api.services.store.list_messages(chat)
    return [(m.seq, m.role.value, m.status.value, m.text()) for m in listed]


async def test_a_turn_that_takes_the_chat_first_leaves_the_question_in_place(
        api: Api, monkeypatch: pytest.MonkeyPatch) -> None:
    chat = await api.new_chat()
    await api.turn(chat, text="the question")
    before = await messages(api, chat)
    assert [m[1:3] for m in before] == [("user", "completed"), ("assistant", "completed")]
    store = api.services.store
    begin: Callable[..., Awaitable[TurnLease]] = store.begin_turn
    other: list[TurnLease] = []

    async def another_tab_first(chat_id: str, start: TurnStart, **kwargs: Any) -> TurnLease:
        if not other:  # another tab's turn takes the chat just before this begin writes
            other.append(await begin(chat_id, TurnStart(
                turn_id="other-tab", user_parts=(TextPart(text="from another tab"),),
                provider="openai", model="gpt-4o", lease_seconds=60)))
        return await begin(chat_id, start, **kwargs)

    monkeypatch.setattr(store, "begin_turn", another_tab_first)
    refused = await api.json("POST", "/api/ui-messages", status=409, json=regenerate(chat))
    assert refused["error"] == "chat_busy"
    assert other, "the competing turn never ran"
    after = await messages(api, chat)
    assert after[:2] == before  # the question and its answer are still there
    assert after[2:] == [(3, "user", "in_progress", "from another tab"),
                         (4, "assistant", "in_progress", "")]
    await store.abort_turn(other[0], TurnAbort(reason="cancelled"))
    # Once the other turn is over, a regenerate asks its (last) question again in place.
    response = await api.call("POST", "/api/ui-messages", json=regenerate(chat))
    assert response.status == 200, await response.text()
    await response.text()
    final = await messages(api, chat)
    assert final[:2] == before
    assert [m[:3] for m in final[2:]] == [(3, "user", "completed"),
                                         (4, "assistant", "completed")]
    assert final[2][3] == "from another tab" and final[3][3]


async def test_a_regenerate_replaces_the_last_question_in_one_begin(
        api: Api, monkeypatch: pytest.MonkeyPatch) -> None:
    """The ordinary regenerate: the last question is asked again in its own place, its old
    answer gone (its turn record kept, without a message id), by the begin alone: the
    route deletes nothing itself."""
    chat = await api.new_chat()
    await api.turn(chat, text="first")
    events = await api.turn(chat, text="second")
    assert events
    store = api.services.store

    async def no_delete(*args: Any, **kwargs: Any) -> int:
        raise AssertionError("the route deleted outside the turn's begin")

    monkeypatch.setattr(store, "delete_messages_from", no_delete)
    response = await api.call("POST", "/api/ui-messages", json=regenerate(chat))
    assert response.status == 200, await response.text()
    stream = await response.text()
    assert '"type":"finish"' in stream.replace(" ", "") and "[DONE]" in stream
    listed = await messages(api, chat)
    assert [m[:3] for m in listed] == [(1, "user", "completed"), (2, "assistant", "completed"),
                                      (3, "user", "completed"), (4, "assistant", "completed")]
    assert [m[3] for m in listed if m[1] == "user"] == ["first", "second"]
    turns = await store.list_turns(chat)
    assert len(turns) == 3 and turns[1].assistant_message_id is None
    assert turns[0].assistant_message_id == (await store.list_messages(chat))[3].id


async def test_a_regenerate_whose_question_went_meanwhile_is_told_so(
        api: Api, monkeypatch: pytest.MonkeyPatch) -> None:
    """The question read, then deleted by another tab before the begin: 404
    ``message_not_found``, nothing else deleted and no turn recorded."""
    chat = await api.new_chat()
    await api.turn(chat, text="first")
    await api.turn(chat, text="second")
    store = api.services.store
    begin: Callable[..., Awaitable[TurnLease]] = store.begin_turn

    async def deleted_first(chat_id: str, start: TurnStart, **kwargs: Any) -> TurnLease:
        await store.delete_messages_from(chat_id, 3)
        return await begin(chat_id, start, **kwargs)

    monkeypatch.setattr(store, "begin_turn", deleted_first)
    refused = await api.json("POST", "/api/ui-messages", status=404, json=regenerate(chat))
    assert refused["error"] == "message_not_found"
    left = await messages(api, chat)
    assert [m[:3] for m in left] == [(1, "user", "completed"), (2, "assistant", "completed")]
    assert left[0][3] == "first"
    assert len(await store.list_turns(chat)) == 2


async def test_a_turn_with_replace_from_replaces_in_its_begin(
        api: Api, monkeypatch: pytest.MonkeyPatch) -> None:
    """``POST /api/chats/{id}/turns`` takes ``replace_from`` (the page's regenerate): the
    question at that seq and what follows are replaced by the turn's begin."""
    chat = await api.new_chat()
    await api.turn(chat, text="first")
    await api.turn(chat, text="second")
    events = await api.turn(chat, text="second, edited", replace_from=3)
    assert events[-1].event == "turn_completed"
    listed = await messages(api, chat)
    assert [m[:3] for m in listed] == [(1, "user", "completed"), (2, "assistant", "completed"),
                                      (3, "user", "completed"), (4, "assistant", "completed")]
    assert listed[2][3] == "second, edited"


@pytest.mark.parametrize("value", [0, -1, True, 1.5, "3", [3], {}])
async def test_a_replace_from_that_is_no_seq_is_refused_naming_it(api: Api, value: Any) -> None:
    chat = await api.new_chat()
    await api.turn(chat, text="first")
    refused = await api.json("POST", f"/api/chats/{chat}/turns", status=400,
                             json={"provider": "openai", "model": "gpt-4o", "text": "again",
                                   "replace_from": value})
    assert refused["field"] == "replace_from"
    assert len(await messages(api, chat)) == 2


async def test_a_refused_turn_with_replace_from_deletes_nothing(
        api: Api, monkeypatch: pytest.MonkeyPatch) -> None:
    """A seq the chat does not hold: 404; another turn took the chat first: 409; in
    both cases the messages stay as they were."""
    chat = await api.new_chat()
    await api.turn(chat, text="first")
    before = await messages(api, chat)
    body = {"provider": "openai", "model": "gpt-4o", "text": "again"}
    missing = await api.json("POST", f"/api/chats/{chat}/turns", status=404,
                             json={**body, "replace_from": 7})
    assert missing["error"] == "message_not_found"
    assert await messages(api, chat) == before
    store = api.services.store
    begin: Callable[..., Awaitable[TurnLease]] = store.begin_turn
    other: list[TurnLease] = []

    async def another_tab_first(chat_id: str, start: TurnStart, **kwargs: Any) -> TurnLease:
        if not other:
            other.append(await begin(chat_id, TurnStart(
                turn_id="other-tab", user_parts=(TextPart(text="from another tab"),),
                provider="openai", model="gpt-4o", lease_seconds=60)))
        return await begin(chat_id, start, **kwargs)

    monkeypatch.setattr(store, "begin_turn", another_tab_first)
    busy = await api.json("POST", f"/api/chats/{chat}/turns", status=409,
                          json={**body, "replace_from": 1})
    assert busy["error"] == "chat_busy"
    assert (await messages(api, chat))[:2] == before
    await store.abort_turn(other[0], TurnAbort(reason="cancelled"))
