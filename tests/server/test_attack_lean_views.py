"""The chat list and the chat view read messages without their media bytes
(``Store.load_messages_lean``): ten chats of a 16 MiB image each made ``GET /api/chats``
take 4.3 s and hold hundreds of MiB, and every open of such a chat decoded its bytes.

A spy counts the base64 decodes of media (the stores' only way to the bytes): none for
the list, the view, a page of it, an edit's or a delete's answer; the part's own route
still serves the bytes."""

from __future__ import annotations

import base64
from typing import Any

import attrs
import pytest

from tests.server.support import Api
from turnstate.core import ImagePart, TextPart
from turnstate.core._media_tokens import media_tokens
from turnstate.testing._records import commit, start

MIB = 1024 * 1024
PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + (1200).to_bytes(4, "big") \
    + (900).to_bytes(4, "big") + b"\x08\x02\x00\x00\x00"


class Decodes:
    """Counts base64 decodes of more than a KiB."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.large = 0
        real = base64.b64decode

        def counting(text: Any, *args: Any, **kwargs: Any) -> bytes:
            self.large += len(text) > 1024
            return real(text, *args, **kwargs)

        monkeypatch.setattr(base64, "b64decode", counting)


async def test_the_list_and_the_view_never_read_media_bytes(
        api: Api, monkeypatch: pytest.MonkeyPatch) -> None:
    store = api.services.store
    image = ImagePart(media_type="image/png", data=PNG + bytes(2 * MIB), filename="big.png")
    chats = []
    for index in range(3):
        chat = await api.new_chat()
        lease = await store.begin_turn(chat, attrs.evolve(
            start(f"t{index}"), user_parts=(TextPart(text=f"picture {index}"), image)))
        await store.commit_turn(lease, commit("resp"))
        chats.append(chat)
    decodes = Decodes(monkeypatch)
    listed = await api.json("GET", "/api/chats")
    assert sorted(c["title"] for c in listed["chats"]) == ["picture 0", "picture 1",
                                                           "picture 2"]
    view = await api.json("GET", f"/api/chats/{chats[0]}")
    paged = await api.json("GET", f"/api/chats/{chats[0]}?limit=1&before=2")
    edited = await api.json("PATCH", f"/api/chats/{chats[1]}/messages/2",
                            json={"text": "x"}, status=400)  # an answer: refused
    deleted = await api.json("DELETE", f"/api/chats/{chats[2]}/messages/2")
    assert decodes.large == 0
    shown = view["messages"][0]["parts"]
    assert shown == [{"type": "text", "text": "picture 0"},
                     {"type": "image", "mediaType": "image/png", "filename": "big.png",
                      "tokens": media_tokens(image), "bytes": len(image.data or b""),
                      "src": f"/api/chats/{chats[0]}/messages/1/parts/1"}]
    assert paged["messages"][0]["parts"] == shown
    assert edited["field"] == "seq"
    assert deleted["messages"][0]["parts"][1]["bytes"] == len(image.data or b"")
    served = await api.call("GET", shown[1]["src"])
    assert (served.status, await served.read()) == (200, image.data)
    # the route reads them; SQLite keeps them as a blob apart (schema version 11): no base64
    assert decodes.large == 0
