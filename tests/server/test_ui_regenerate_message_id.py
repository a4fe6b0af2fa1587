"""``regenerate({messageId})`` in the AI SDK regenerates the answer it names, not the last
one. The SDK cuts its own messages back to the question before that answer and posts
``trigger: "regenerate-message"`` with the ``messageId``; the server ignored the id and
asked the last stored question again, so the client showed the first question with an
answer to the last one while the store kept the later turns. Now the question asked again
is the one before the named answer (by its turn id) or the named question (``CHAT:SEQ``),
deleted with what follows it in the turn's begin; an id the chat does not hold is ``404
message_not_found`` and deletes nothing."""

from __future__ import annotations

from typing import Any

from tests.server.support import Api


async def _history(api: Api, chat: str) -> list[dict[str, Any]]:
    return await api.json("GET", f"/api/ui-messages/{chat}")  # type: ignore[no-any-return]


def _texts(history: list[dict[str, Any]]) -> list[str]:
    return ["".join(p["text"] for p in m["parts"] if p["type"] == "text") for m in history]


async def _regenerate(api: Api, chat: str, history: list[dict[str, Any]], index: int,
                      status: int = 200) -> Any:
    """What ``DefaultChatTransport`` posts for ``regenerate({messageId})`` of
    ``history[index]``: the messages before that answer (or up to that question)."""
    named = history[index]
    kept = history[:index] if named["role"] == "assistant" else history[:index + 1]
    response = await api.call("POST", "/api/ui-messages", json={
        "id": chat, "messages": kept, "trigger": "regenerate-message",
        "messageId": named["id"], "provider": "openai", "model": "gpt-4o"})
    assert response.status == status, await response.text()
    return await (response.json() if status != 200 else response.text())


async def test_regenerate_an_earlier_answer_or_question_by_its_id(api: Api) -> None:
    chat = await api.new_chat()
    for text in ("first", "second", "third"):
        await api.turn(chat, text=text)
    history = await _history(api, chat)
    await _regenerate(api, chat, history, 3)  # the answer to "second", by its turn id
    history = await _history(api, chat)
    assert _texts(history) == ["first", "You said: first", "second", "You said: second"]
    await _regenerate(api, chat, history, 0)  # the first question, by its CHAT:SEQ id
    assert _texts(await _history(api, chat)) == ["first", "You said: first"]


async def test_an_id_the_chat_does_not_hold_deletes_nothing(api: Api) -> None:
    chat = await api.new_chat()
    await api.turn(chat, text="first")
    await api.turn(chat, text="second")
    history = await _history(api, chat)
    for stranger in ("no-such-turn", f"{chat}:7", f"{chat}:2"):  # seq 2 is an answer
        refused = await _regenerate(api, chat, [*history[:1], {**history[1], "id": stranger}],
                                    1, status=404)
        assert (refused["error"], refused["field"]) == ("message_not_found", "messageId")
    assert await _history(api, chat) == history
