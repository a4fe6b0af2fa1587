"""``POST /api/ui-messages``: a retried submit runs one turn, and ids never name another
message (helper "idem9").

``useChat`` resends its user message with the same id when its request is retried; the
server keys the turn by that id, so the retry streams the turn it already ran. Questions
were named ``CHAT:SEQ``, a seq "delete from here" hands to the next question: a stale
tab's edit or regenerate replaced a question it never saw. They are named by their stored
ids now, which no other message ever takes; an id the chat no longer holds is 404.
"""

from __future__ import annotations

import json
from typing import Any

from tests.server.support import Api
from tests.server.test_idem9_idempotency import _sent, kapi
from tests.server.test_ui_edit import _edit, _history, _texts

__all__ = ["kapi"]


async def _submit(api: Api, chat: str, messages: list[dict[str, Any]],
                  **extra: Any) -> tuple[int, Any, str]:
    response = await api.call("POST", "/api/ui-messages", json={
        "id": chat, "messages": messages, "trigger": "submit-message", "provider": "openai",
        "model": "gpt-4o", **extra})
    return response.status, response.headers, await response.text()


def _question(message_id: str, text: str) -> dict[str, Any]:
    return {"id": message_id, "role": "user", "parts": [{"type": "text", "text": text}]}


def _text(body: str) -> str:
    chunks = [json.loads(line[len("data: "):]) for line in body.splitlines()
              if line.startswith("data: {")]
    return "".join(c.get("delta", "") for c in chunks if c.get("type") == "text-delta")


async def test_a_retried_submit_runs_one_turn(kapi: Api) -> None:
    api = kapi
    chat = await api.new_chat()
    sent = [_question("msg-aaaa", "hello")]
    status, _headers, first = await _submit(api, chat, sent)
    assert status == 200 and _sent(api) == 1
    status, again, second = await _submit(api, chat, sent)  # the SDK's retry, same id
    assert status == 200, second
    assert _sent(api) == 1  # no provider call, nothing billed
    assert again["Idempotent-Replayed"] == "true"
    assert _text(second) == _text(first) != ""
    assert _texts(await _history(api, chat)) == ["hello", _text(first)]
    status, _, body = await _submit(api, chat, [_question("msg-aaaa", "something else")])
    assert status == 422 and _sent(api) == 1, body


async def test_a_stale_tabs_id_names_nothing_after_delete_from_here(api: Api) -> None:
    chat = await api.new_chat()
    for text in ("first", "second"):
        await api.turn(chat, text=text)
    stale = await _history(api, chat)  # tab A loads the chat
    await api.json("DELETE", f"/api/chats/{chat}/messages/3")  # tab B: delete from here
    await api.turn(chat, text="other")  # and asks again: seq 3 once more
    refused = await _edit(api, chat, stale, 2, [{"type": "text", "text": "edited"}],
                          status=404)
    assert (refused["error"], refused["field"]) == ("message_not_found", "messageId")
    status, _, body = await _submit(api, chat, stale[:3], trigger="regenerate-message",
                                    messageId=stale[2]["id"])
    assert status == 404, body
    assert _texts(await _history(api, chat))[2] == "other"  # tab B's question stands
    legacy = f"{chat}:3"  # the old id form names nothing now
    status, _, body = await _submit(api, chat, [_question(legacy, "x")], messageId=legacy)
    assert status == 404, body
