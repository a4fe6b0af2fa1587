"""A refused file part of a UI message is named where the client sent it.

``POST /api/ui-messages`` names its own refusals by the UI message's path
(``messages[0].parts[0].url`` for a data URL of another media type), but every check
made after its file parts became this API's ``content`` parts named that list, which
the client never sent: bad base64 was ``content[0].data``, a plain-http URL
``content[0].url``, a media type outside the list ``content[0].mediaType``, an image for
a model without images ``content[0]``.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.server.support import Api


def _ask(chat: str, parts: list[dict[str, Any]], model: tuple[str, str] = (
        "openai", "gpt-4o")) -> dict[str, Any]:
    return {"id": chat, "provider": model[0], "model": model[1], "messages": [
        {"id": "a", "role": "user", "parts": [{"type": "text", "text": "earlier"}]},
        {"id": "b", "role": "assistant", "parts": [{"type": "text", "text": "ok"}]},
        {"id": "c", "role": "user", "parts": parts}]}


TEXT = {"type": "text", "text": "look"}
PNG = {"type": "file", "mediaType": "image/png", "url": "data:image/png;base64,iVBORw0KGgo="}


@pytest.mark.parametrize(("parts", "field"), [
    ([TEXT, {**PNG, "url": "data:image/png;base64,!!"}], "messages[2].parts[1].url"),
    ([{**PNG, "url": "http://example.com/a.png"}], "messages[2].parts[0].url"),
    ([TEXT, PNG, {"type": "file", "mediaType": "text/plain",
                  "url": "data:text/plain;base64,aGk="}], "messages[2].parts[2].mediaType"),
    ([PNG, TEXT, {**PNG, "filename": "a\nb.png"}], "messages[2].parts[2].filename"),
])
async def test_a_bad_file_part_is_named_by_its_place_in_the_message(
        api: Api, parts: list[dict[str, Any]], field: str) -> None:
    chat = await api.new_chat()
    refused = await api.json("POST", "/api/ui-messages", status=400, json=_ask(chat, parts))
    assert (refused["error"], refused["field"]) == ("invalid_field", field)


async def test_an_image_for_a_model_without_images_is_named_by_its_place(api: Api) -> None:
    chat = await api.new_chat()
    refused = await api.json("POST", "/api/ui-messages", status=400, json=_ask(
        chat, [TEXT, PNG], model=("deepseek", "deepseek-chat")))
    assert refused["field"] == "messages[2].parts[1]", refused
