"""A precondition holds against a write that lands between the check and the write
(helper "places12").

places11's ``If-Match`` read the message, then the route wrote: another tab's (or
another node's) write between the two went unseen. Each test here lands that write
exactly there, from a hook on the store's own write (the hook runs the other write, then
the route's), on every store: the route's write now names the message it checked and the
store compares it in the write itself.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from tests.server.support import Api
from tests.server.test_idem9_idempotency import kapi
from tests.storage.support import commit, start
from turnstate.core import TextPart

__all__ = ["kapi"]


async def _view(api: Api, chat: str) -> dict[str, Any]:
    return await api.json("GET", f"/api/chats/{chat}")  # type: ignore[no-any-return]


def _texts(view: dict[str, Any]) -> list[str]:
    return ["".join(p.get("text", "") for p in m["parts"]) for m in view["messages"]]


async def _two_turns(api: Api) -> tuple[str, list[dict[str, Any]]]:
    chat = await api.new_chat()
    await api.turn(chat, text="first")
    await api.turn(chat, text="second")
    return chat, (await _view(api, chat))["messages"]


def _before(monkeypatch: pytest.MonkeyPatch, api: Api, name: str,
            other: Callable[[], Awaitable[object]]) -> list[str]:
    """Run ``other`` (another request's write) once, right before the store's ``name``
    write the route makes after its check; returns the log of what ran."""
    store, ran = api.services.store, []
    own = getattr(store, name)

    async def hooked(*args: Any, **kwargs: Any) -> Any:
        if not ran:
            ran.append("other")
            await other()
        ran.append(name)
        return await own(*args, **kwargs)

    monkeypatch.setattr(store, name, hooked)
    return ran


async def test_an_edit_after_the_check_is_not_overwritten(
        kapi: Api, monkeypatch: pytest.MonkeyPatch) -> None:
    """Tab B's edit passed its check; tab A's edit landed before B's write: 412."""
    api = kapi
    chat, seen = await _two_turns(api)
    edit = api.services.store.edit_message  # tab A's, not hooked
    ran = _before(monkeypatch, api, "edit_message", lambda: edit(
        chat, 1, (TextPart(text="tab A's"),), owner="alice"))
    response = await api.call("PATCH", f"/api/chats/{chat}/messages/1",
                              json={"text": "tab B's"}, headers={"If-Match": seen[0]["etag"]})
    refused = await response.json()
    assert ran == ["other", "edit_message"]
    assert response.status == 412, refused  # 200 before: tab A's edit overwritten unseen
    now = (await _view(api, chat))["messages"]
    assert _texts(await _view(api, chat))[0] == "tab A's"
    assert (refused["error"], refused["seq"], refused["messageId"], refused["etag"]) == (
        "precondition_failed", 1, now[0]["id"], now[0]["etag"])


async def test_a_delete_after_the_check_is_refused(
        kapi: Api, monkeypatch: pytest.MonkeyPatch) -> None:
    """Tab B's "delete from here" passed its check; tab A's edit of that question landed
    before B's delete: 412, nothing deleted."""
    api = kapi
    chat, seen = await _two_turns(api)
    _before(monkeypatch, api, "delete_messages_from", lambda: api.services.store.edit_message(
        chat, 3, (TextPart(text="second, edited"),), owner="alice"))
    response = await api.call("DELETE", f"/api/chats/{chat}/messages/3",
                              headers={"If-Match": seen[2]["etag"]})
    assert response.status == 412, await response.text()  # 200 before: deleted unseen
    assert _texts(await _view(api, chat)) == ["first", seen[1]["parts"][0]["text"],
                                              "second, edited", seen[3]["parts"][0]["text"]]


async def test_a_delete_of_a_place_taken_after_the_check_is_refused(
        kapi: Api, monkeypatch: pytest.MonkeyPatch) -> None:
    """Between B's check and its delete, A deleted from 3 and asked "third" there."""
    api = kapi
    chat, seen = await _two_turns(api)
    store = api.services.store

    async def replaced() -> None:
        await store.delete_messages_from(chat, 3, owner="alice")
        lease = await store.begin_turn(chat, start("t-third", "third"), owner="alice")
        await store.commit_turn(lease, commit(None))

    _before(monkeypatch, api, "delete_messages_from", replaced)
    response = await api.call("DELETE", f"/api/chats/{chat}/messages/3",
                              headers={"If-Match": seen[2]["etag"]})
    refused = await response.json()
    assert response.status == 412, refused  # 200 before: "third" deleted unseen
    assert refused["messageId"] == "t-third:user"
    assert _texts(await _view(api, chat))[2:] == ["third", "hi"]


async def test_an_unconditional_edit_never_writes_over_an_answer_that_took_the_place(
        kapi: Api, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without ``If-Match`` the route read a question at 3, then another tab deleted from
    2 and a turn put its answer at 3: the edit reads again and refuses to edit an answer
    (before, the answer's text became the user's edit)."""
    api = kapi
    chat, _ = await _two_turns(api)
    store = api.services.store

    async def answer_at_3() -> None:
        await store.delete_messages_from(chat, 2, owner="alice")
        lease = await store.begin_turn(chat, start("t-y", "y"), owner="alice")
        await store.commit_turn(lease, commit(None, parts=(TextPart(text="the answer"),)))

    _before(monkeypatch, api, "edit_message", answer_at_3)
    response = await api.call("PATCH", f"/api/chats/{chat}/messages/3",
                              json={"text": "my edit"})
    refused = await response.json()
    view = await _view(api, chat)
    assert response.status == 400 and refused["field"] == "seq", refused
    assert [m["role"] for m in view["messages"]] == ["user", "user", "assistant"]
    assert _texts(view) == ["first", "y", "the answer"]
