"""A regenerate that the server refuses keeps the question it would have asked again.

``POST /api/ui-messages`` with ``trigger: regenerate-message`` deletes the last stored
question (and its answer) before asking it again; a body or a model the turn would
refuse must be refused first, or the refusal costs the user the question.
"""

from __future__ import annotations

import base64
from typing import Any

from tests.server.support import Api
from tests.server.test_content_parts import png


def regenerate(chat: str, **fields: Any) -> dict[str, Any]:
    return {"id": chat, "trigger": "regenerate-message", "messages": [],
            "provider": "openai", "model": "gpt-4o", **fields}


async def message_count(api: Api, chat: str) -> int:
    return int((await api.json("GET", f"/api/chats/{chat}"))["messageCount"])


async def test_a_regenerate_with_an_unknown_model_keeps_the_question(api: Api) -> None:
    chat = await api.new_chat()
    await api.turn(chat)
    refused = await api.json("POST", "/api/ui-messages", status=400,
                             json=regenerate(chat, model="no-such-model"))
    assert refused["field"] == "model"
    assert await message_count(api, chat) == 2


async def test_a_regenerate_on_a_model_without_images_keeps_the_image_question(
        api: Api) -> None:
    chat = await api.new_chat()
    image = {"type": "image", "mediaType": "image/png",
             "data": base64.b64encode(png()).decode()}
    await api.turn(chat, content=[image])
    refused = await api.json("POST", "/api/ui-messages", status=400,
                             json=regenerate(chat, provider="deepseek", model="deepseek-chat"))
    assert refused["field"].startswith("content[")
    assert await message_count(api, chat) == 2

