"""Searching the chat list: ``GET /api/chats?q=`` (titles and first questions)."""

from __future__ import annotations

from urllib.parse import quote

import pytest

from tests.server.support import Api
from turnstate.server import ServerConfig


@pytest.fixture
def config() -> ServerConfig:
    return ServerConfig(page_size=2)


async def _ids(api: Api, query: str, owner: str = "alice", after: str | None = None
               ) -> tuple[list[str], str | None]:
    path = f"/api/chats?q={quote(query)}" + (f"&after={after}" if after else "")
    page = await api.json("GET", path, owner)
    return [chat["title"] for chat in page["chats"]], page["next"]


async def test_q_finds_titles_and_first_questions_of_the_caller_s_chats_paged(
        api: Api) -> None:
    for text in ("Lisbon weather?", "a poem", "trams in LISBON", "something else"):
        await api.turn(await api.new_chat(), text=text)
    poem = (await api.json("GET", "/api/chats?limit=10"))["chats"][2]["id"]
    await api.json("PATCH", f"/api/chats/{poem}", json={"title": "Lisbon poems"})
    await api.turn(await api.new_chat("bob"), "bob", text="lisbon")
    titles, following = await _ids(api, "  lisbon ")
    assert titles == ["trams in LISBON", "Lisbon poems"]  # newest first, two a page
    assert following is not None
    assert await _ids(api, "lisbon", after=following) == (["Lisbon weather?"], None)
    assert await _ids(api, "porto") == ([], None)
    assert (await _ids(api, "lisbon", "bob"))[0] == ["lisbon"]
    assert len((await api.json("GET", "/api/chats?q=%20&limit=10"))["chats"]) == 4


@pytest.mark.parametrize("query", ["x" * 201, "a%00b", "ta%09b"])
async def test_a_bad_q_is_refused_naming_it(api: Api, query: str) -> None:
    answer = await api.json("GET", f"/api/chats?q={query}", status=400)
    assert (answer["error"], answer["field"]) == ("invalid_field", "q")
