"""``GET /api/ui-messages/{chat}`` (a ``useChat``'s initial messages) reads the chat
without its media bytes: an inline image or PDF is the URL of the route that serves it,
never a ``data:`` URL. It read every message in full and sent each file inline: a chat
of ten 16 MiB images took about 4 s and 870 MiB at peak per request (SQLite and
PostgreSQL), and its answer was 213 MiB of JSON."""

from __future__ import annotations

from typing import Any

import attrs
import pytest

from tests.server.support import Api
from tests.server.test_attack_lean_views import PNG, Decodes
from turnstate.core import FilePart, ImagePart, TextPart
from turnstate.testing._records import commit, start

MIB = 1024 * 1024


async def test_the_ui_history_gives_media_by_url_and_never_reads_their_bytes(
        api: Api, monkeypatch: pytest.MonkeyPatch) -> None:
    store = api.services.store
    chat = await api.new_chat()
    image = ImagePart(media_type="image/png", data=PNG + bytes(2 * MIB), filename="big.png")
    pdf = FilePart(media_type="application/pdf", data=b"%PDF-1.4\n" + bytes(MIB))
    linked = ImagePart(media_type="image/png", url="https://example.com/cat.png")
    lease = await store.begin_turn(chat, attrs.evolve(
        start("t1"), user_parts=(TextPart(text="look"), image, linked, pdf)))
    await store.commit_turn(lease, commit("resp"))
    decodes, full_reads = Decodes(monkeypatch), []
    for name in ("list_messages", "load_messages", "load_history",  # reads with the bytes
                 "load_media_part"):
        read = getattr(store, name)

        async def counted(*args: Any, read: Any = read, name: str = name,
                          **kwargs: Any) -> Any:
            full_reads.append(name)
            return await read(*args, **kwargs)

        monkeypatch.setattr(store, name, counted)
    answer = await api.call("GET", f"/api/ui-messages/{chat}")
    body = await answer.read()
    assert (decodes.large, full_reads) == (0, [])
    assert len(body) < 4096
    question = (await answer.json())[0]
    assert question["parts"] == [
        {"type": "text", "text": "look"},
        {"type": "file", "mediaType": "image/png", "filename": "big.png",
         "url": f"/api/chats/{chat}/messages/1/parts/1"},
        {"type": "file", "mediaType": "image/png", "url": "https://example.com/cat.png"},
        {"type": "file", "mediaType": "application/pdf",
         "url": f"/api/chats/{chat}/messages/1/parts/3"}]
    for part, sent in ((question["parts"][1], image), (question["parts"][3], pdf)):
        served = await api.call("GET", part["url"])  # with the bearer token, as the page
        assert (served.status, await served.read()) == (200, sent.data)
    assert full_reads == ["load_media_part"] * 2  # the part route's, one each
