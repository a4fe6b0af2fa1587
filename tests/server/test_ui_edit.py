"""An AI SDK edit: ``useChat``'s ``sendMessage({text, files, messageId})`` replaces the
message ``messageId`` names and drops what follows, then posts ``trigger:
"submit-message"`` with that ``messageId``. A question loaded from ``GET
/api/ui-messages`` carries its images as this server's own part route
(``/api/chats/{id}/messages/{seq}/parts/{index}``), so the edit sends that URL back: it
was refused (not an https URL), and the server ignored ``messageId``, so an edit was
appended after the old question and its answer instead of replacing them.

The route URL is read from the store, never fetched, and only for the caller's own part
of this chat: another chat's, another owner's, another host's, a part that is no image
are refused naming the part."""

from __future__ import annotations

import base64
import json
from typing import Any

from tests.server.support import Api
from tests.server.test_content_parts import body, image, png


async def _history(api: Api, chat: str, owner: str = "alice") -> list[dict[str, Any]]:
    return await api.json("GET", f"/api/ui-messages/{chat}", owner)  # type: ignore[no-any-return]


def _texts(history: list[dict[str, Any]]) -> list[str]:
    return ["".join(p["text"] for p in m["parts"] if p["type"] == "text") for m in history]


async def _edit(api: Api, chat: str, history: list[dict[str, Any]], index: int,
                parts: list[dict[str, Any]], status: int = 200) -> Any:
    """What ``DefaultChatTransport`` posts for ``sendMessage({...parts, messageId})`` of
    ``history[index]``: the messages before it and the message replaced."""
    edited = {"id": history[index]["id"], "role": "user", "parts": parts}
    response = await api.call("POST", "/api/ui-messages", json={
        "id": chat, "messages": [*history[:index], edited], "trigger": "submit-message",
        "messageId": history[index]["id"], "provider": "openai", "model": "gpt-4o"})
    assert response.status == status, await response.text()
    return await (response.text() if status == 200 else response.json())


async def _chat_with_picture(api: Api, picture: bytes, owner: str = "alice") -> str:
    chat = await api.new_chat(owner)
    response = await api.call("POST", f"/api/chats/{chat}/turns", owner,
                              json=body("what is this?", content=[image(picture)]))
    assert response.status == 200, await response.text()
    await response.read()
    await api.turn(chat, owner, text="and then?")
    return chat


async def test_an_edit_keeps_its_stored_image_and_replaces_the_question(api: Api) -> None:
    picture = png()
    chat = await _chat_with_picture(api, picture)
    history = await _history(api, chat)
    assert _texts(history) == ["what is this?", f"You said: what is this? Attached: an "
                               f"image/png of {len(picture):,} bytes.", "and then?",
                               "You said: and then? Earlier: an image/png of "
                               f"{len(picture):,} bytes."]
    shown = history[0]["parts"][1]
    assert shown["url"] == f"/api/chats/{chat}/messages/1/parts/1"
    said = await _edit(api, chat, history, 0, [shown, {"type": "text", "text": "what, really?"}])
    deltas = [json.loads(line[6:]) for line in said.split("\n") if line.startswith("data: {")]
    answer = "".join(c["delta"] for c in deltas if c["type"] == "text-delta")
    assert f"an image/png of {len(picture):,} bytes" in answer
    history = await _history(api, chat)
    assert len(history) == 2 and _texts(history)[0] == "what, really?"  # replaced, not added
    moved = history[0]["parts"][1]  # after the text, as the first question
    assert moved["type"] == "file" and moved["mediaType"] == "image/png"
    assert await (await api.call("GET", moved["url"])).read() == picture
    # the same URL made absolute against this server is the same part
    absolute = str(api.client.make_url(moved["url"]))
    await _edit(api, chat, history, 0, [{**moved, "url": absolute},
                                         {"type": "text", "text": "once more"}])
    history = await _history(api, chat)
    assert _texts(history)[0] == "once more"
    assert await (await api.call("GET", history[0]["parts"][1]["url"])).read() == picture


async def test_a_part_url_of_another_chat_owner_or_host_is_refused_unread(api: Api) -> None:
    chat = await _chat_with_picture(api, png())
    other = await _chat_with_picture(api, png(5, 5))
    bobs = await _chat_with_picture(api, png(7, 7), "bob")
    history = await _history(api, chat)
    before = (history, await api.json("GET", f"/api/chats/{chat}"))
    for url in (f"/api/chats/{other}/messages/1/parts/1",  # the owner's, another chat
                f"/api/chats/{bobs}/messages/1/parts/1",  # another owner's
                f"/api/chats/{chat}/messages/1/parts/0",  # the question's text
                f"/api/chats/{chat}/messages/9/parts/1",  # no such message
                f"/api/chats/{chat}/messages/1/parts/1/../../1/parts/1",
                "http://169.254.169.254/api/chats/x/messages/1/parts/1",  # another host
                f"http://127.0.0.2:1/api/chats/{chat}/messages/1/parts/1"):
        refused = await _edit(api, chat, history, 0, [
            {"type": "file", "mediaType": "image/png", "url": url},
            {"type": "text", "text": "steal"}], status=400)
        assert refused["field"] == "messages[0].parts[0].url", (url, refused)
    assert (await _history(api, chat), await api.json("GET", f"/api/chats/{chat}")) == before


async def test_an_edit_of_a_message_sent_in_this_session_names_it_by_its_own_id(
        api: Api) -> None:
    """A message ``useChat`` sent itself keeps the id the client gave it: the store
    recorded it as its turn's client key, and the edit names that stored question (was:
    the stored message at the same place in the list, whatever it held; idem9). An id the
    chat's questions never carried is 404, never the message at its place."""
    chat = await api.new_chat()
    picture = png()
    url = f"data:image/png;base64,{base64.b64encode(picture).decode()}"
    sent = [{"id": "client-1", "role": "user", "parts": [{"type": "text", "text": "one"}]}]
    for text in ("one", "two"):
        response = await api.call("POST", "/api/ui-messages", json={
            "id": chat, "messages": sent, "trigger": "submit-message", "provider": "openai",
            "model": "gpt-4o"})
        assert response.status == 200, await response.text()
        await response.read()
        sent = [*sent, {"id": "x", "role": "assistant", "parts": []},
                {"id": "client-2", "role": "user", "parts": [{"type": "text", "text": "two"}]}]
        del text
    stored = await _history(api, chat)
    history = [{**m, "id": sent_id} for m, sent_id in zip(
        stored, ("client-1", stored[1]["id"], "client-2", stored[3]["id"]), strict=True)]
    await _edit(api, chat, history, 2, [{"type": "file", "mediaType": "image/png", "url": url},
                                        {"type": "text", "text": "TWO"}])
    assert _texts(await _history(api, chat)) == ["one", "You said: one", "TWO",
                                                 f"You said: TWO Attached: an image/png of "
                                                 f"{len(picture):,} bytes."]
    await _edit(api, chat, history, 2, [{"type": "text", "text": "TWO again"}])  # its id
    assert _texts(await _history(api, chat))[2] == "TWO again"  # names the edit's question
    for index, stranger in ((1, None), (0, "client-9")):  # an answer; an id never sent
        if stranger is not None:
            history[index]["id"] = stranger
        refused = await _edit(api, chat, history, index, [{"type": "text", "text": "x"}],
                              status=404)
        assert (refused["error"], refused["field"]) == ("message_not_found", "messageId")
    assert _texts(await _history(api, chat))[0] == "one"
