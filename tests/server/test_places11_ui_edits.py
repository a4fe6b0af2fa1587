"""A stale tab's AI SDK edit never asks past a question it never saw (helper "places11").

``sendMessage({text, messageId})`` posts the tab's whole copy of the chat up to the edited
question. When another client changed a question before it since (``PATCH`` keeps the
message's id, so the edited question is still found), the edit asked the changed history
on the tab's behalf. The questions the tab sent before the edited one must now be the
stored ones: else ``409 message_changed`` naming the first that differs, nothing asked.
A regenerate's earlier questions are held to the same.
"""

from __future__ import annotations

from typing import Any

from tests.server.support import Api
from tests.server.test_edits10_stale_tabs import _regenerate
from tests.server.test_idem9_idempotency import _sent, kapi
from tests.server.test_ui_edit import _edit, _history, _texts

__all__ = ["kapi"]

TEXT = [{"type": "text", "text": "edited"}]


async def _two_turns_and_a_stale_tab(api: Api) -> tuple[str, list[dict[str, Any]]]:
    """Tab B read the chat; another client then edited its first question in place."""
    chat = await api.new_chat()
    await api.turn(chat, text="first")
    await api.turn(chat, text="second")
    tab_b = await _history(api, chat)
    await api.json("PATCH", f"/api/chats/{chat}/messages/1", json={"text": "patched"})
    return chat, tab_b


async def test_a_stale_tabs_edit_after_an_earlier_question_changed_is_409(kapi: Api) -> None:
    api = kapi
    chat, tab_b = await _two_turns_and_a_stale_tab(api)
    before = _sent(api)
    refused = await _edit(api, chat, tab_b, 2, TEXT, status=409)  # 200 before: asked
    assert (refused["error"], refused["field"]) == ("message_changed", "messages[0]")
    assert _sent(api) == before
    assert _texts(await _history(api, chat))[::2] == ["patched", "second"]


async def test_an_up_to_date_or_trimmed_edit_still_runs(kapi: Api) -> None:
    api = kapi
    chat, _ = await _two_turns_and_a_stale_tab(api)
    fresh = await _history(api, chat)
    await _edit(api, chat, fresh, 2, TEXT)
    assert _texts(await _history(api, chat))[::2] == ["patched", "edited"]
    again = await _history(api, chat)
    edited = {"id": again[2]["id"], "role": "user",
              "parts": [{"type": "text", "text": "only the last sent"}]}
    response = await api.call("POST", "/api/ui-messages", json={  # a client that sends
        "id": chat, "messages": [edited], "trigger": "submit-message",  # the last only
        "messageId": again[2]["id"], "provider": "openai", "model": "gpt-4o"})
    assert response.status == 200, await response.text()
    await response.read()
    assert _texts(await _history(api, chat))[2] == "only the last sent"


async def test_a_stale_tabs_regenerate_after_an_earlier_question_changed_is_409(
        kapi: Api) -> None:
    api = kapi
    chat, tab_b = await _two_turns_and_a_stale_tab(api)
    before = _sent(api)
    status, refused = await _regenerate(api, chat, tab_b[:3], tab_b[3]["id"])
    assert status == 409, refused  # 200 before: "second" asked after "patched"
    assert (refused["error"], refused["field"]) == ("message_changed", "messages[0]")
    status, refused = await _regenerate(api, chat, tab_b[:3], None)
    assert (status, refused["error"]) == (409, "message_changed"), refused
    assert _sent(api) == before
