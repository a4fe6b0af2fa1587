"""The chat view: answers tied to their own turn, a context meter that follows deletes,
and paging through a long chat."""

from __future__ import annotations

from tests.server.support import Api


async def test_after_delete_from_here_each_answer_shows_its_own_turn(api: Api) -> None:
    """Sequence numbers are reused after a delete: the audit follows the message id."""
    chat = await api.new_chat()
    await api.turn(chat, provider="openai", model="gpt-4o")
    await api.json("DELETE", f"/api/chats/{chat}/messages/1")
    await api.turn(chat, provider="anthropic", model="claude-sonnet-4-5")
    view = await api.json("GET", f"/api/chats/{chat}")
    answer = view["messages"][1]
    assert answer["seq"] == 2
    assert (answer["turn"]["provider"], answer["turn"]["model"]) == \
        ("anthropic", "claude-sonnet-4-5")
    assert answer["turn"]["strategy"] == "local_loop"  # anthropic: stateless


async def test_the_context_meter_follows_a_delete(api: Api) -> None:
    """After deleting most of a chat the meter estimates what remains, not the old fill."""
    chat = await api.new_chat()
    small = {"provider": "openai-compatible", "model": "demo-small-context"}
    for index in range(6):
        await api.turn(chat, text=f"note {index} " + "lorem ipsum " * 110, **small)
    full = (await api.json("GET", f"/api/chats/{chat}"))["context"]
    # The sixth turn trims to a fixed cut point (core._overflow.trim_points): the chat
    # then fills 73% of the 2,048-token window (it was 91% when the trim cut the fewest).
    assert full["estimatedUsageRatio"] > 0.7
    after = await api.json("DELETE", f"/api/chats/{chat}/messages/3")
    assert after["context"]["estimatedUsageRatio"] < 0.3
    assert after["context"]["severity"] == "normal"
    assert after["context"]["source"] == "estimate"
    assert (await api.json("GET", f"/api/chats/{chat}"))["context"] == after["context"]
    emptied = await api.json("DELETE", f"/api/chats/{chat}/messages/1")
    assert emptied["context"] is None
    await api.turn(chat, **small)  # a new turn stores a fresh snapshot
    assert (await api.json("GET", f"/api/chats/{chat}"))["context"]["source"] == "provider"


async def test_the_chat_view_is_paged_newest_first(api: Api) -> None:
    chat = await api.new_chat()
    for index in range(30):
        await api.turn(chat, text=f"q{index}")
    view = await api.json("GET", f"/api/chats/{chat}")
    assert view["messageCount"] == 60
    assert [m["seq"] for m in view["messages"]] == list(range(11, 61))
    assert view["older"] == 11
    assert view["title"] == "q0"  # the title still comes from the first message
    older = await api.json("GET", f"/api/chats/{chat}?before=11&limit=4")
    assert [m["seq"] for m in older["messages"]] == [7, 8, 9, 10]
    assert older["older"] == 7
    first = await api.json("GET", f"/api/chats/{chat}?before=7&limit=100")
    assert [m["seq"] for m in first["messages"]] == list(range(1, 7))
    assert first["older"] is None
    assert first["messages"][1]["turn"]["strategy"] == "replay"
    for bad in ("before=0", "before=x", "limit=0", "limit=101", "before=99999999999"):
        response = await api.call("GET", f"/api/chats/{chat}?{bad}")
        assert response.status == 400, bad
        assert (await response.json())["field"] in {"before", "limit"}
