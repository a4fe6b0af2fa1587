"""A ``content`` text part with a lone surrogate is a 400 naming that part (it was
reported as ``text``, beside a ``text`` field that was fine)."""

from __future__ import annotations

from tests.server.support import Api


async def test_a_text_part_utf8_cannot_encode_is_named(api: Api) -> None:
    chat = await api.new_chat()
    body = ('{"provider": "openai", "model": "gpt-4o", "text": "look", '
            '"content": [{"type": "text", "text": "a \\ud800"}]}')
    refused = await api.json("POST", f"/api/chats/{chat}/turns", status=400, data=body)
    assert (refused["error"], refused["field"]) == ("invalid_field", "content[0].text")
