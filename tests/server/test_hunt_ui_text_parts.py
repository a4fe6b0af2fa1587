"""A UI message's text part whose ``text`` is not a string is a 400 naming it.

``POST /api/ui-messages`` joined ``str(part["text"])``: a ``null`` text asked the model
"None", an object its Python repr.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.server.support import Api


@pytest.mark.parametrize("text", [None, {"a": 1}, 5, ["hi"]])
async def test_a_text_part_that_is_not_a_string_is_refused(api: Api, text: Any) -> None:
    chat = await api.new_chat()
    parts = [{"type": "text", "text": "look: "}, {"type": "text", "text": text}]
    refused = await api.json("POST", "/api/ui-messages", status=400, json={
        "id": chat, "provider": "openai", "model": "gpt-4o",
        "messages": [{"role": "user", "parts": parts}]})
    assert (refused["error"], refused["field"]) == ("invalid_field",
                                                    "messages[0].parts[1].text")
    assert (await api.json("GET", f"/api/chats/{chat}"))["messageCount"] == 0
