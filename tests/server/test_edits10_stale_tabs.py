"""A stale tab's regenerate never asks a question it never saw (helper "edits10").

The AI SDK keeps a user message's id across edits, so once tab A edited question Q the id
tab B holds for Q names the edited question: tab B's regenerate naming it (or naming
nothing: the chat's last question) asked tab A's question again. Its own copy of the
question (the last user message it sends) now has to be the stored one: else ``409
message_changed``, nothing asked, nothing cut.
"""

from __future__ import annotations

import json
from typing import Any

from tests.server.support import Api
from tests.server.test_idem9_idempotency import _sent, kapi
from tests.server.test_idem9_ui_ids import _question, _submit
from tests.server.test_ui_edit import _history, _texts

__all__ = ["kapi"]


async def _regenerate(api: Api, chat: str, messages: list[dict[str, Any]],
                      message_id: str | None) -> tuple[int, Any]:
    extra = {} if message_id is None else {"messageId": message_id}
    status, _, body = await _submit(api, chat, messages, trigger="regenerate-message",
                                    **extra)
    return status, json.loads(body) if status != 200 else body


async def _edited_by_tab_a(api: Api) -> tuple[str, list[dict[str, Any]]]:
    """A chat whose question ``msg-aaaa`` ("hello") tab A edited to "edited"; tab B's
    messages, read before."""
    chat = await api.new_chat()
    await _submit(api, chat, [_question("msg-aaaa", "hello")])
    tab_b = await _history(api, chat)
    tab_b[0]["id"] = "msg-aaaa"  # the id its own useChat gave the question
    status, _, body = await _submit(api, chat, [_question("msg-aaaa", "edited")],
                                    messageId="msg-aaaa")
    assert status == 200 and _sent(api) == 2, body
    return chat, tab_b


async def test_a_stale_tabs_regenerate_by_client_id_is_refused(kapi: Api) -> None:
    api = kapi
    chat, tab_b = await _edited_by_tab_a(api)
    status, refused = await _regenerate(api, chat, tab_b[:1], "msg-aaaa")
    assert status == 409, refused  # 200 before: "edited" asked again
    assert (refused["error"], refused["field"]) == ("message_changed", "messageId")
    assert _sent(api) == 2
    assert _texts(await _history(api, chat))[0] == "edited"


async def test_a_stale_tabs_plain_regenerate_is_refused(kapi: Api) -> None:
    api = kapi
    chat, tab_b = await _edited_by_tab_a(api)
    status, refused = await _regenerate(api, chat, tab_b[:1], None)  # regenerate()
    assert status == 409, refused
    assert (refused["error"], refused["field"]) == ("message_changed", "messages")
    assert _sent(api) == 2


async def test_a_stale_tabs_regenerate_by_stored_id_is_refused(kapi: Api) -> None:
    """Both tabs loaded the chat (``GET``): both name the question by its stored id, which
    tab A's edit keys its turn by."""
    api = kapi
    chat = await api.new_chat()
    await api.turn(chat, text="hello")
    tab_b = await _history(api, chat)
    stored = tab_b[0]["id"]
    status, _, body = await _submit(api, chat, [_question(stored, "edited")],
                                    messageId=stored)
    assert status == 200 and _sent(api) == 2, body
    status, refused = await _regenerate(api, chat, tab_b[:1], stored)
    assert (status, refused["error"]) == (409, "message_changed"), refused
    status, refused = await _regenerate(api, chat, tab_b, tab_b[1]["id"])  # old answer
    assert (status, refused["error"]) == (404, "message_not_found"), refused
    assert _sent(api) == 2


async def test_a_tab_that_saw_the_edit_regenerates_it(kapi: Api) -> None:
    api = kapi
    chat, _ = await _edited_by_tab_a(api)
    tab_a = [_question("msg-aaaa", "edited")]
    for message_id in ("msg-aaaa", None):
        status, body = await _regenerate(api, chat, tab_a, message_id)
        assert status == 200, body
    assert _sent(api) == 4
    assert _texts(await _history(api, chat))[0] == "edited"
