"""A retried edit runs nothing (helper "edits10").

An edit (``replace_from`` with an ``Idempotency-Key``, or an AI SDK ``sendMessage`` naming
the message it replaces, keyed by that message's id) cuts the question it replaces, which
freed its key: the very same request retried ran and billed a second turn. Now the retry
is answered with the first run (``_edit_retry``). Checked on every store.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from tests.server.support import Api, parse_sse, turn_body
from tests.server.test_idem9_idempotency import _sent, kapi
from tests.server.test_idem9_ui_ids import _question, _submit, _text
from tests.server.test_ui_edit import _history, _texts

__all__ = ["kapi"]


async def _edit(api: Api, chat: str, message_id: str, text: str,
                before: list[dict[str, Any]] | None = None) -> tuple[int, Any, str]:
    """What ``sendMessage({text, messageId})`` posts: the messages before the edited one
    and the edited one, under its own id."""
    return await _submit(api, chat, [*(before or []), _question(message_id, text)],
                         messageId=message_id)


async def test_a_retried_ai_sdk_edit_runs_once(kapi: Api) -> None:
    api = kapi
    chat = await api.new_chat()
    assert (await _submit(api, chat, [_question("msg-aaaa", "hello")]))[0] == 200
    status, _, first = await _edit(api, chat, "msg-aaaa", "edited")
    assert status == 200 and _sent(api) == 2, first
    status, headers, again = await _edit(api, chat, "msg-aaaa", "edited")  # its retry
    assert status == 200, again
    assert _sent(api) == 2  # nothing asked, nothing billed (3 before)
    assert headers["Idempotent-Replayed"] == "true"
    assert _text(again) == _text(first) != ""
    assert _texts(await _history(api, chat)) == ["edited", _text(first)]
    # The same message edited again (the SDK keeps its id): a new edit, it runs.
    status, headers, third = await _edit(api, chat, "msg-aaaa", "edited twice")
    assert status == 200 and "Idempotent-Replayed" not in headers, third
    assert _sent(api) == 3
    assert _texts(await _history(api, chat))[0] == "edited twice"


async def test_a_retried_ai_sdk_edit_of_an_earlier_question_runs_once(kapi: Api) -> None:
    api = kapi
    chat = await api.new_chat()
    await _submit(api, chat, [_question("msg-aaaa", "one")])
    history = await _history(api, chat)
    await _submit(api, chat, [*history, _question("msg-bbbb", "two")])
    assert _sent(api) == 2
    for _ in range(2):  # the edit, then its retry
        status, _, body = await _edit(api, chat, "msg-aaaa", "one, edited")
        assert status == 200, body
    assert _sent(api) == 3
    assert _texts(await _history(api, chat))[0::2] == ["one, edited"]


async def _post(api: Api, chat: str, text: str, key: str,
                **extra: Any) -> tuple[int, Any, str]:
    response = await api.call("POST", f"/api/chats/{chat}/turns",
                              json=turn_body(text, **extra),
                              headers={"Idempotency-Key": key})
    return response.status, response.headers, await response.text()


async def test_a_retried_turns_edit_runs_once(kapi: Api) -> None:
    api = kapi
    chat = await api.new_chat()
    assert (await _post(api, chat, "hello", "k-ask"))[0] == 200
    status, _, first = await _post(api, chat, "edited", "k-edit", replace_from=1)
    assert status == 200 and _sent(api) == 2, first
    status, headers, again = await _post(api, chat, "edited", "k-edit", replace_from=1)
    assert status == 200 and _sent(api) == 2, again  # 3 before
    assert headers["Idempotent-Replayed"] == "true"
    firsts, _ = parse_sse(first)
    agains, _ = parse_sse(again)
    assert agains[-1].data["text"] == firsts[-1].data["text"]
    # Another edit under that key: refused, as any other question under a used key.
    status, _, body = await _post(api, chat, "edited again", "k-edit", replace_from=1)
    refused = json.loads(body)
    assert (status, refused["error"], refused["field"]) == (
        422, "idempotency_key_reused", "Idempotency-Key"), body
    assert _sent(api) == 2
    detail = await api.json("GET", f"/api/chats/{chat}")
    assert [m["parts"][0]["text"] for m in detail["messages"]][:1] == ["edited"]


async def test_a_turns_edit_key_followed_since_is_refused(kapi: Api) -> None:
    """A late copy of an edit whose turn later turns followed would cut them: 422, never
    a second run nor a silent replay of a chat that moved on."""
    api = kapi
    chat = await api.new_chat()
    await _post(api, chat, "hello", "k-ask")
    await _post(api, chat, "edited", "k-edit", replace_from=1)
    await _post(api, chat, "next", "k-next")
    status, _, body = await _post(api, chat, "edited", "k-edit", replace_from=1)
    assert (status, json.loads(body)["error"]) == (422, "idempotency_key_reused"), body
    assert _sent(api) == 3


async def test_two_copies_of_an_edit_at_once_run_one_turn(kapi: Api) -> None:
    """The second copy's begin is refused ``chat_busy`` by the first's turn, or comes
    after it ended: either way it follows that turn (the second was 409 or ran again)."""
    api = kapi
    chat = await api.new_chat()
    await _submit(api, chat, [_question("msg-aaaa", "hello")])
    (one, h1, b1), (two, h2, b2) = await asyncio.gather(
        _edit(api, chat, "msg-aaaa", "edited"), _edit(api, chat, "msg-aaaa", "edited"))
    assert (one, two) == (200, 200), (b1, b2)
    assert _sent(api) == 2
    assert _text(b1) == _text(b2) != ""
    assert {h1.get("Idempotent-Replayed"), h2.get("Idempotent-Replayed")} == {None, "true"}


async def test_a_submit_retried_after_a_regenerate_runs_nothing(kapi: Api) -> None:
    """A regenerate asks its question again in its place: its turn takes the question's
    key over. Before, its cut freed the key, and the submit's retry asked a third time."""
    api = kapi
    chat = await api.new_chat()
    sent = [_question("msg-aaaa", "hello")]
    await _submit(api, chat, sent)
    answer = (await _history(api, chat))[1]["id"]
    status, _, regenerated = await _submit(api, chat, sent, trigger="regenerate-message",
                                           messageId=answer)
    assert status == 200 and _sent(api) == 2, regenerated
    status, headers, again = await _submit(api, chat, sent)  # the first submit's retry
    assert status == 200 and _sent(api) == 2, again
    assert headers["Idempotent-Replayed"] == "true"
    assert _texts(await _history(api, chat)) == ["hello", _text(regenerated)]


async def test_an_edit_whose_key_moved_after_its_list_read_follows_that_turn(
        kapi: Api) -> None:
    """Two copies of an edit at once: the second's whole run lands between the first
    copy's read of the chat's messages and its read of the key's turn, so the key names a
    question the first copy's list does not hold. That list is older than the key, and
    read again: the first copy follows the second's turn (it was a 404, 3 runs in 25 of
    the test above under load)."""
    api = kapi
    store: Any = api.services.store
    chat = await api.new_chat()
    await _submit(api, chat, [_question("msg-aaaa", "hello")])
    keyed, ran, started = store.keyed_turn, [], []

    async def keyed_turn(chat_id: str, key: str) -> str | None:
        if not started:  # the first copy, its messages read: the other copy runs whole now
            started.append(True)
            ran.append(await _edit(api, chat, "msg-aaaa", "edited"))
        return await keyed(chat_id, key)  # type: ignore[no-any-return]

    store.keyed_turn = keyed_turn
    try:
        status, headers, body = await _edit(api, chat, "msg-aaaa", "edited")
    finally:
        del store.keyed_turn
    (other_status, _, other), = ran
    assert (status, other_status) == (200, 200), body
    assert headers["Idempotent-Replayed"] == "true"
    assert _sent(api) == 2
    assert _text(body) == _text(other) != ""
