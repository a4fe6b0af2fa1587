"""A regenerate names the question it asks again (helper "places12").

The page's Regenerate, Retry and "Save & regenerate" are ``POST .../turns`` with
``replace_from``: the turn's begin deletes the question at that seq and what follows. A
stale page named a place another tab had filled since, and its turn deleted and re-asked
what it never showed. The turn now takes ``If-Match`` naming the question (its view
``etag``): 412 when the place holds another message, nothing asked or deleted.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.server.support import Api, turn_body
from tests.server.test_idem9_idempotency import kapi
from turnstate.core import TextPart

__all__ = ["kapi"]


async def _view(api: Api, chat: str) -> dict[str, Any]:
    return await api.json("GET", f"/api/chats/{chat}")  # type: ignore[no-any-return]


def _sent(api: Api) -> int:
    return sum(len(e.requests) for e in api.stack.emulators.values())


def _texts(view: dict[str, Any]) -> list[str]:
    return ["".join(p.get("text", "") for p in m["parts"]) for m in view["messages"]]


async def _regenerate(api: Api, chat: str, seq: int, text: str,
                      etag: str | None) -> tuple[int, dict[str, Any] | str]:
    response = await api.call("POST", f"/api/chats/{chat}/turns",
                              json={**turn_body(text), "replace_from": seq},
                              headers={} if etag is None else {"If-Match": etag})
    if response.status == 200:
        return 200, await response.text()
    return response.status, await response.json()


async def _two_turns(api: Api) -> tuple[str, list[dict[str, Any]]]:
    chat = await api.new_chat()
    await api.turn(chat, text="first")
    await api.turn(chat, text="second")
    return chat, (await _view(api, chat))["messages"]


async def test_a_stale_regenerate_after_another_tabs_regenerate_is_412(kapi: Api) -> None:
    """Tab A regenerated the last answer (its question is a new message at 3); tab B's
    Regenerate names the question it showed."""
    api = kapi
    chat, seen = await _two_turns(api)
    status, _ = await _regenerate(api, chat, 3, "second", seen[2]["etag"])
    assert status == 200  # tab A's, up to date
    before, asked = await _view(api, chat), _sent(api)
    status, refused = await _regenerate(api, chat, 3, "second", seen[2]["etag"])
    assert status == 412, refused  # 200 before: asked a third time, A's answer deleted
    assert isinstance(refused, dict)
    assert (refused["error"], refused["field"], refused["seq"], refused["messageId"]) == (
        "precondition_failed", "If-Match", 3, before["messages"][2]["id"])
    assert _sent(api) == asked and await _view(api, chat) == before


async def test_a_stale_save_and_regenerate_after_a_question_was_deleted_is_412(
        kapi: Api) -> None:
    api = kapi
    chat, seen = await _two_turns(api)
    await api.json("DELETE", f"/api/chats/{chat}/messages/3")
    asked = _sent(api)
    status, refused = await _regenerate(api, chat, 3, "second, edited", seen[2]["etag"])
    assert status == 412 and isinstance(refused, dict), refused  # 404 before
    assert (refused["messageId"], refused["etag"]) == (None, None)
    assert _sent(api) == asked and _texts(await _view(api, chat)) == _texts(
        {"messages": seen[:2]})


async def test_an_up_to_date_regenerate_runs_and_star_names_any(kapi: Api) -> None:
    api = kapi
    chat, seen = await _two_turns(api)
    status, _ = await _regenerate(api, chat, 3, "again", seen[2]["etag"])
    assert status == 200 and _texts(await _view(api, chat))[2] == "again"
    status, _ = await _regenerate(api, chat, 3, "once more", "*")
    assert status == 200 and _texts(await _view(api, chat))[2] == "once more"


async def test_if_match_on_a_turn_that_replaces_nothing_is_400(kapi: Api) -> None:
    api = kapi
    chat, seen = await _two_turns(api)
    response = await api.call("POST", f"/api/chats/{chat}/turns", json=turn_body("third"),
                              headers={"If-Match": seen[2]["etag"]})
    refused = await response.json()
    assert response.status == 400 and refused["field"] == "If-Match", refused
    assert len((await _view(api, chat))["messages"]) == 4


async def test_a_regenerate_whose_question_changed_after_the_check_is_412(
        kapi: Api, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another tab's edit of the question lands after the route's check, just before the
    turn's begin: the begin's own write finds the question changed (the check alone let
    the turn cut the edit and ask the old words)."""
    api = kapi
    chat, seen = await _two_turns(api)
    store = api.services.store
    begin, edit = store.begin_turn, store.edit_message

    async def edited_first(*args: Any, **kwargs: Any) -> Any:
        await edit(chat, 3, (TextPart(text="tab A's"),), owner="alice")
        return await begin(*args, **kwargs)

    monkeypatch.setattr(store, "begin_turn", edited_first)
    asked = _sent(api)
    status, refused = await _regenerate(api, chat, 3, "second", seen[2]["etag"])
    monkeypatch.undo()
    assert status == 412, refused
    assert _sent(api) == asked
    assert _texts(await _view(api, chat))[2:] == ["tab A's", _texts({"messages": seen})[3]]
