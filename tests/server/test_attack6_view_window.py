"""The chat view's title and message count do not depend on the window asked for: an
empty window (``?before=1``, nothing older than the first message) named the chat
"New chat" although its first message says otherwise."""

from __future__ import annotations

from tests.server.support import Api


async def test_an_empty_window_keeps_the_chats_title(api: Api) -> None:
    chat = await api.new_chat()
    await api.turn(chat, text="what is the weather in Lisbon?")
    await api.turn(chat, text="and in Porto?")
    whole = await api.json("GET", f"/api/chats/{chat}")
    assert whole["title"] == "what is the weather in Lisbon?"
    for before in (1, 2, 3, 5):
        view = await api.json("GET", f"/api/chats/{chat}?before={before}")
        assert (view["title"], view["messageCount"]) == (whole["title"], 4), before
        assert [m["seq"] for m in view["messages"]] == list(range(1, before))[:4]
    empty = await api.new_chat()
    assert (await api.json("GET", f"/api/chats/{empty}?before=1"))["title"] == "New chat"
