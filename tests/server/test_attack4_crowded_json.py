"""A JSON body with more values than any request needs is refused before it is parsed
(attack4).

The turn routes take bodies up to 28 MiB (an image's base64). The same size of ``{},``
parsed into 9 million dicts: 650 MiB and about 3 s of the event loop per request, and
the turn route kept the parsed body for as long as the turn's stream ran (one owner's
64 streams, 41 GB). ``crowded_json`` counts the commas and opening brackets first (only
for bodies longer than the bound) and refuses more than ``MAX_JSON_VALUES``.
"""

from __future__ import annotations

import base64
import json
import os

import pytest

from tests.server.support import Api, turn_body
from turnstate.server import ServerConfig
from turnstate.server._http import MAX_JSON_VALUES, crowded_json

PNG = (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + (640).to_bytes(4, "big")
       + (480).to_bytes(4, "big") + b"\x08\x02\x00\x00\x00")


@pytest.fixture
def config() -> ServerConfig:
    return ServerConfig(max_body_bytes=64 * 1024, max_content_bytes=8 << 20,
                        max_text_chars=2_000)


def _crowded(body: dict[str, object]) -> bytes:
    text = json.dumps(body)
    return (text[:-1] + ', "junk": [' + "{}," * MAX_JSON_VALUES + "{}]}").encode()


@pytest.mark.parametrize("route", ["turns", "ui-messages"])
async def test_a_body_of_a_million_values_is_refused_unparsed(api: Api, route: str) -> None:
    chat = await api.new_chat()
    if route == "turns":
        path, body = f"/api/chats/{chat}/turns", turn_body("hi")
    else:
        path, body = "/api/ui-messages", {"id": chat, "provider": "openai", "model": "gpt-4o",
                                          "messages": [{"id": "m1", "role": "user",
                                                        "parts": [{"type": "text",
                                                                   "text": "hi"}]}]}
    response = await api.call("POST", path, data=_crowded(body),
                              headers={"Content-Type": "application/json"})
    assert response.status == 400, await response.text()
    assert (await response.json())["error"] == "invalid_json"
    assert not await api.services.store.list_messages(chat)


async def test_a_large_image_body_is_read(api: Api) -> None:
    chat = await api.new_chat()
    image = base64.b64encode(PNG + os.urandom(4 << 20)).decode()
    response = await api.call("POST", f"/api/chats/{chat}/turns", json=turn_body(
        "look, here, at, this", content=[{"type": "image", "mediaType": "image/png",
                                          "data": image}]))
    assert response.status == 200 and "turn_completed" in await response.text()


def test_the_count_is_made_only_past_the_bound() -> None:
    assert crowded_json(b"[" + b"0," * (MAX_JSON_VALUES // 2 - 1) + b"0]") is None
    assert crowded_json(b'{"t": "' + b"," * MAX_JSON_VALUES + b'"}') is not None
    assert crowded_json(b'{"t": "' + b"a" * (4 * MAX_JSON_VALUES) + b'"}') is None
