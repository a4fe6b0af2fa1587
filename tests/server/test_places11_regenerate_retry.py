"""A copy of an AI SDK ``regenerate({messageId})`` asks the model once (helper "places11").

``regenerate({messageId})`` names the answer it replaces; once it ran, that answer is gone
and the chat holds the new one, so the same request sent again (a network retry, or a tab
that never saw the new answer) named nothing: ``404``. It is now answered with the turn
that regenerated it, from its first event (``Idempotent-Replayed: true``), and nothing is
asked. A plain ``regenerate()`` names nothing and sends exactly what a second press sends:
it still runs (docs/server.md).
"""

from __future__ import annotations

import json
from typing import Any

from tests.server.support import Api
from tests.server.test_idem9_idempotency import _sent, kapi
from tests.server.test_idem9_ui_ids import _submit, _text
from tests.server.test_ui_edit import _history

__all__ = ["kapi"]


def _answer_id(body: str) -> str:
    """The answer's id: the stream's ``start`` chunk's ``messageId`` (its turn's id)."""
    starts = [json.loads(line[len("data: "):]) for line in body.splitlines()
              if line.startswith('data: {"type":"start"')]
    return str(starts[0]["messageId"])


async def _regenerate(api: Api, chat: str, seen: list[dict[str, Any]],
                      answer: str) -> tuple[int, Any, str]:
    """What ``regenerate({messageId: answer})`` posts: the messages before that answer."""
    at = next(i for i, m in enumerate(seen) if m["id"] == answer)
    return await _submit(api, chat, seen[:at], trigger="regenerate-message",
                         messageId=answer)


async def test_a_regenerates_retry_gets_the_first_runs_answer(kapi: Api) -> None:
    api = kapi
    chat = await api.new_chat()
    await api.turn(chat, text="hello")
    seen = await _history(api, chat)
    status, _, first = await _regenerate(api, chat, seen, seen[1]["id"])
    assert status == 200 and _sent(api) == 2, first
    status, again, body = await _regenerate(api, chat, seen, seen[1]["id"])
    assert status == 200, body  # 404 message_not_found before
    assert (_answer_id(body), again.get("Idempotent-Replayed")) == (_answer_id(first), "true")
    assert _text(body) == _text(first) and _sent(api) == 2
    now = await _history(api, chat)
    assert [m["id"] for m in now] == [now[0]["id"], _answer_id(first)]


async def test_a_second_press_still_asks_and_a_late_copy_gets_the_newest(
        kapi: Api) -> None:
    api = kapi
    chat = await api.new_chat()
    await api.turn(chat, text="hello")
    seen = await _history(api, chat)
    await _regenerate(api, chat, seen, seen[1]["id"])
    pressed = await _history(api, chat)
    status, _, newest = await _regenerate(api, chat, pressed, pressed[1]["id"])
    assert status == 200 and _sent(api) == 3  # a new answer named: asked again
    status, _, late = await _regenerate(api, chat, seen, seen[1]["id"])
    assert status == 200 and _sent(api) == 3  # the first copy, late: the newest answer
    assert _answer_id(late) == _answer_id(newest)


async def test_a_copy_of_another_question_or_after_more_turns_is_not_a_retry(
        kapi: Api) -> None:
    api = kapi
    chat = await api.new_chat()
    await api.turn(chat, text="hello")
    seen = await _history(api, chat)
    await _regenerate(api, chat, seen, seen[1]["id"])
    other = [{**seen[0], "parts": [{"type": "text", "text": "not asked"}]}]
    status, _, body = await _submit(api, chat, other, trigger="regenerate-message",
                                    messageId=seen[1]["id"])
    assert (status, json.loads(body)["error"]) == (404, "message_not_found")
    await api.turn(chat, text="and then?")
    status, _, body = await _regenerate(api, chat, seen, seen[1]["id"])
    assert (status, json.loads(body)["error"]) == (404, "message_not_found")
    assert _sent(api) == 3
