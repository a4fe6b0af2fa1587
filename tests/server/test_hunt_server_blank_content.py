"""A question of blank text parts only is refused, as a blank ``text`` is (the engine's
input check refuses both, naming ``content`` here: the question is the parts).

``POST .../turns`` refuses ``"text": "  "`` (400 naming ``text``), but ``content`` of
text parts that are empty or whitespace passed the check ("give a non-empty text or
content": the list was not empty) and the turn asked the provider a blank question,
which Anthropic refuses (a text block must hold non-whitespace text) after the turn
began, and which stayed in the history every later replay sends.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.server.support import Api


@pytest.mark.parametrize("body", [
    {"content": [{"type": "text", "text": "   "}]},
    {"text": "", "content": [{"type": "text", "text": ""}]},
    {"text": " ", "content": [{"type": "text", "text": "\n"}, {"type": "text", "text": ""}]},
])
async def test_blank_text_parts_alone_are_a_400_before_any_request(
        api: Api, body: dict[str, Any]) -> None:
    chat = await api.new_chat()
    refused = await api.json("POST", f"/api/chats/{chat}/turns", status=400,
                             json={"provider": "anthropic", "model": "claude-sonnet-4-5",
                                   **body})
    assert (refused["error"], refused["field"]) == ("invalid_field", "content")
    assert not api.stack.emulators["anthropic"].requests
    assert (await api.json("GET", f"/api/chats/{chat}"))["messageCount"] == 0


async def test_a_blank_text_part_beside_an_image_url_is_still_a_question(api: Api) -> None:
    chat = await api.new_chat()
    events = await api.turn(chat, text="", content=[
        {"type": "text", "text": " "}, {"type": "image", "url": "https://example.com/a.png"}])
    assert events[-1].event == "turn_completed"
