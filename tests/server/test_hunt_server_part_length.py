"""A ``content`` text part over ``--max-text-chars`` is ``413 text_too_long`` naming it,
as the ``text`` and ``system_prompt`` fields are; it was a ``400 invalid_field``, so a
client told apart "too long" from "not text" by the field it sent the text in."""

from __future__ import annotations

from tests.server.support import Api, turn_body


async def test_a_text_part_over_the_limit_is_text_too_long(api: Api) -> None:
    chat = await api.new_chat()
    limit = api.services.config.max_text_chars
    refused = await api.json("POST", f"/api/chats/{chat}/turns", status=413, json=turn_body(
        content=[{"type": "text", "text": "x" * (limit + 1)}]))
    assert (refused["error"], refused["field"]) == ("text_too_long", "content[0].text")
    events = await api.turn(chat, content=[{"type": "text", "text": "x" * limit}])
    assert events[-1].event == "turn_completed"
