"""wire12: an image a Gemini model generates reaches the AI SDK as a ``file`` part (its
bytes a ``data:`` URL while it streams), and the stored answer names it by the media
route, which serves it to the chat's owner alone with its type, ``nosniff`` and a policy
that runs nothing; the chat view gives it a ``src`` as a user's attachment."""

from __future__ import annotations

import base64
from typing import Any

from tests.server import test_ai_sdk
from tests.server.support import Api
from tests.server.test_ai_sdk import read_through_sdk, stored, without_progress

pytestmark = test_ai_sdk.pytestmark
GEMINI = {"provider": "gemini", "model": "gemini-2.5-flash"}


async def test_a_generated_image_streams_to_the_sdk_and_is_served_to_its_owner(
        api: Api) -> None:
    chat = await api.new_chat()
    turn = await read_through_sdk(api, chat, "a red dot [[image]]", **GEMINI)
    assert turn["errors"] == []
    (live,) = [p for p in turn["message"]["parts"] if p["type"] == "file"]
    head = "data:image/png;base64,"
    assert live["mediaType"] == "image/png" and live["url"].startswith(head)
    png = base64.b64decode(live["url"][len(head):])
    assert png.startswith(b"\x89PNG")

    view = await api.json("GET", f"/api/chats/{chat}")
    (seq, index, shown), = [(m["seq"], i, p) for m in view["messages"]
                            if m["role"] == "assistant" for i, p in enumerate(m["parts"])
                            if p["type"] == "image"]
    answer = (await stored(api, chat))[1]
    (kept,) = [p for p in answer["parts"] if p["type"] == "file"]
    assert kept == {"type": "file", "mediaType": "image/png",
                    "url": f"/api/chats/{chat}/messages/{seq}/parts/{index}"}
    same: dict[str, Any] = {**answer, "parts": [live if p is kept else p
                                                for p in answer["parts"]]}
    assert without_progress(turn["message"]) == same  # the stream's parts, read back

    served = await api.call("GET", kept["url"])
    assert served.status == 200 and await served.read() == png
    assert served.headers["Content-Type"] == "image/png"
    assert served.headers["X-Content-Type-Options"] == "nosniff"
    assert served.headers["Content-Security-Policy"] == "default-src 'none'; sandbox"
    assert (await api.call("GET", kept["url"], owner="bob")).status == 404
    assert shown["src"] == kept["url"] and shown["bytes"] == len(png)
