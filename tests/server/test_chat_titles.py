"""Renaming a chat (``PATCH /api/chats/{id}``) and the bound on an owner's chats."""

from __future__ import annotations

import pytest

from tests.server.support import Api
from tests.storage.support import start
from turnstate.server import ServerConfig
from turnstate.server._titles import MAX_TITLE_CHARS


@pytest.fixture
def config() -> ServerConfig:
    return ServerConfig(max_body_bytes=64 * 1024, max_content_bytes=256 * 1024,
                        max_text_chars=2_000, max_chats_per_owner=3)


async def _titles(api: Api, owner: str = "alice") -> dict[str, str]:
    page = await api.json("GET", "/api/chats", owner)
    return {chat["id"]: chat["title"] for chat in page["chats"]}


async def test_a_chat_is_renamed_and_named_by_its_first_message_again(api: Api) -> None:
    chat = await api.new_chat()
    await api.turn(chat, text="what is the weather in Lisbon?")
    before = await api.json("GET", f"/api/chats/{chat}")
    assert (before["title"], before["renamed"]) == ("what is the weather in Lisbon?", False)
    renamed = await api.json("PATCH", f"/api/chats/{chat}",
                             json={"title": "  Lisbon trip 🇵🇹 👩‍👩‍👧  "})
    assert (renamed["title"], renamed["renamed"]) == ("Lisbon trip 🇵🇹 👩‍👩‍👧", True)
    assert renamed["messageCount"] == before["messageCount"]
    assert (await api.json("GET", f"/api/chats/{chat}"))["title"] == "Lisbon trip 🇵🇹 👩‍👩‍👧"
    assert (await _titles(api))[chat] == "Lisbon trip 🇵🇹 👩‍👩‍👧"
    assert (await api.json("GET", "/api/chats"))["chats"][0]["updatedAt"] == \
        before["updatedAt"]  # a rename is no activity: the list order stays
    back = await api.json("PATCH", f"/api/chats/{chat}", json={"title": None})
    assert (back["title"], back["renamed"]) == ("what is the weather in Lisbon?", False)


async def test_another_owner_s_chat_cannot_be_renamed(api: Api) -> None:
    chat = await api.new_chat()
    answer = await api.json("PATCH", f"/api/chats/{chat}", "bob", status=404,
                            json={"title": "bob's now"})
    assert answer["error"] == "not_found"
    await api.json("PATCH", "/api/chats/missing", status=404, json={"title": "x"})
    assert (await _titles(api))[chat] == "New chat"


@pytest.mark.parametrize(("body", "status", "word"), [
    ({}, 400, "required"),
    ({"title": ""}, 400, "empty"),
    ({"title": "   "}, 400, "empty"),
    ({"title": 5}, 400, "string"),
    ({"title": ["x"]}, 400, "string"),
    ({"title": "two\nlines"}, 400, "U+000A"),
    ({"title": "tab\there"}, 400, "U+0009"),
    ({"title": "nul\x00"}, 400, "U+0000"),
    ({"title": "c1\x85c1"}, 400, "U+0085"),
    ({"title": "del\x7fhere"}, 400, "U+007F"),
    ({"title": "abc\u202egnp.exe"}, 400, "U+202E"),  # shown reversed: "abcexe.png"
    ({"title": "x" * (MAX_TITLE_CHARS + 1)}, 413, "longer"),
])
async def test_a_title_must_be_one_line_of_visible_text(
        api: Api, body: dict[str, object], status: int, word: str) -> None:
    chat = await api.new_chat()
    answer = await api.json("PATCH", f"/api/chats/{chat}", status=status, json=body)
    assert answer["field"] == "title"
    assert word in answer["message"]
    assert (await _titles(api))[chat] == "New chat"


async def test_a_lone_surrogate_title_is_refused(api: Api) -> None:
    chat = await api.new_chat()
    answer = await api.json("PATCH", f"/api/chats/{chat}", status=400,
                            data=b'{"title": "a\\ud800b"}',
                            headers={"Content-Type": "application/json"})
    assert answer["field"] == "title"


async def test_the_longest_title_is_taken(api: Api) -> None:
    chat = await api.new_chat()
    title = "é" * MAX_TITLE_CHARS
    assert (await api.json("PATCH", f"/api/chats/{chat}", json={"title": title}))[
        "title"] == title


async def test_a_running_turn_does_not_refuse_a_rename(api: Api) -> None:
    chat = await api.new_chat()
    lease = await api.services.store.begin_turn(chat, start("t-busy"))
    renamed = await api.json("PATCH", f"/api/chats/{chat}", json={"title": "busy one"})
    assert (renamed["title"], renamed["busy"]) == ("busy one", True)
    assert lease.chat_id == chat


async def test_an_owner_s_chats_are_bounded_with_a_typed_409(api: Api) -> None:
    made = [await api.new_chat() for _ in range(3)]
    answer = await api.json("POST", "/api/chats", status=409)
    assert answer["error"] == "too_many_chats"
    assert answer["limit"] == 3
    assert "delete" in answer["message"]
    await api.new_chat("bob")  # bob's count is his own
    await api.call("DELETE", f"/api/chats/{made[0]}")
    await api.new_chat()  # room again
    assert len((await api.json("GET", "/api/chats"))["chats"]) == 3
