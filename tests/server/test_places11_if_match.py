"""A stale client never edits or deletes a message it never saw (helper "places11").

``PATCH`` and ``DELETE /api/chats/{id}/messages/{seq}`` name a place; "delete from here"
hands the place to the next question and an edit in place changes what it holds. A client
that sends the message's ``etag`` (the chat view's) as ``If-Match`` is refused ``412
precondition_failed`` when the message at ``seq`` is not that one; without the header
nothing changed.
"""

from __future__ import annotations

from typing import Any

from tests.server.support import Api
from tests.server.test_idem9_idempotency import kapi

__all__ = ["kapi"]


async def _view(api: Api, chat: str) -> dict[str, Any]:
    return await api.json("GET", f"/api/chats/{chat}")  # type: ignore[no-any-return]


async def _two_turns(api: Api) -> tuple[str, list[dict[str, Any]]]:
    chat = await api.new_chat()
    await api.turn(chat, text="first")
    await api.turn(chat, text="second")
    return chat, (await _view(api, chat))["messages"]


def _texts(view: dict[str, Any]) -> list[str]:
    return ["".join(p.get("text", "") for p in m["parts"]) for m in view["messages"]]


async def test_the_view_names_each_message_by_id_and_etag(kapi: Api) -> None:
    _, messages = await _two_turns(kapi)
    ids = [m["id"] for m in messages]
    assert len(set(ids)) == 4 and all(m["etag"].startswith(f'"{m["id"]}.') for m in messages)


async def test_a_stale_delete_after_another_tabs_delete_is_412(kapi: Api) -> None:
    """Tab B saw question 3 ("second"); tab A deleted from 3 and asked "third" there."""
    api = kapi
    chat, seen = await _two_turns(api)
    await api.json("DELETE", f"/api/chats/{chat}/messages/3")
    await api.turn(chat, text="third")
    response = await api.call("DELETE", f"/api/chats/{chat}/messages/3",
                              headers={"If-Match": seen[2]["etag"]})
    refused = await response.json()
    assert response.status == 412, refused  # 200 before: "third" deleted unseen
    now = (await _view(api, chat))["messages"]
    assert (refused["error"], refused["field"], refused["seq"]) == (
        "precondition_failed", "If-Match", 3)
    assert (refused["messageId"], refused["etag"]) == (now[2]["id"], now[2]["etag"])
    assert _texts(await _view(api, chat))[2] == "third" and len(now) == 4


async def test_a_stale_edit_after_another_tabs_edit_is_412(kapi: Api) -> None:
    """An edit in place keeps the message's id: the etag still tells it changed."""
    api = kapi
    chat, seen = await _two_turns(api)
    path = f"/api/chats/{chat}/messages/1"
    edited = await api.json("PATCH", path, json={"text": "tab A's"},
                            headers={"If-Match": seen[0]["etag"]})
    assert edited["messages"][0]["id"] == seen[0]["id"]
    response = await api.call("PATCH", path, json={"text": "tab B's"},
                              headers={"If-Match": seen[0]["etag"]})
    refused = await response.json()
    assert response.status == 412, refused  # 200 before: tab A's edit overwritten unseen
    assert refused["etag"] == edited["messages"][0]["etag"] != seen[0]["etag"]
    assert _texts(await _view(api, chat))[0] == "tab A's"
    response = await api.call("DELETE", path, headers={"If-Match": seen[0]["etag"]})
    assert response.status == 412
    assert len((await _view(api, chat))["messages"]) == 4


async def test_a_delete_of_a_message_gone_is_412_naming_none(kapi: Api) -> None:
    api = kapi
    chat, seen = await _two_turns(api)
    await api.json("DELETE", f"/api/chats/{chat}/messages/3")
    for method, body in (("DELETE", None), ("PATCH", {"text": "x"})):
        response = await api.call(method, f"/api/chats/{chat}/messages/3", json=body,
                                  headers={"If-Match": seen[2]["etag"]})
        refused = await response.json()
        assert response.status == 412, refused
        assert (refused["messageId"], refused["etag"]) == (None, None)


async def test_a_matching_tag_a_star_or_no_header_go_through(kapi: Api) -> None:
    api = kapi
    chat, seen = await _two_turns(api)
    path = f"/api/chats/{chat}/messages"
    edited = await api.json("PATCH", f"{path}/3", json={"text": "again"},
                            headers={"If-Match": f'"nope", {seen[2]["etag"]}'})
    await api.json("PATCH", f"{path}/3", json={"text": "once more"},
                   headers={"If-Match": edited["messages"][2]["etag"]})
    await api.json("PATCH", f"{path}/1", json={"text": "star"}, headers={"If-Match": "*"})
    await api.json("PATCH", f"{path}/1", json={"text": "plain"})
    deleted = await api.json("DELETE", f"{path}/3", headers={"If-Match": "*"})
    assert deleted["deleted"] == 2 and _texts(deleted)[0] == "plain"


async def test_a_weak_or_malformed_tag_never_matches(kapi: Api) -> None:
    api = kapi
    chat, seen = await _two_turns(api)
    path = f"/api/chats/{chat}/messages/3"
    weak = await api.call("DELETE", path, headers={"If-Match": f"W/{seen[2]['etag']}"})
    assert weak.status == 412
    for bad in (seen[2]["id"], '"open', ""):
        response = await api.call("DELETE", path, headers={"If-Match": bad})
        refused = await response.json()
        assert (response.status, refused["field"]) == (400, "If-Match"), (bad, refused)
    assert len((await _view(api, chat))["messages"]) == 4
