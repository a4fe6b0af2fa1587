"""An AI SDK message that names this server's stored media many times is refused before
its bytes are read (attack8).

A question loaded from ``GET /api/ui-messages`` carries its images as this server's own
part route, which an edit sends back; the server reads each such part from the store,
base64 again, before the turn's checks. Those checks (at most ``MAX_PARTS`` parts, at
most the engine's ``max_inline_bytes`` of inline bytes) ran only after every named part
was read: a request of 200 parts naming one stored image (24 KB of JSON, no large-body
slot) read it 200 times, and naming a 20 MiB image that way held about 200 x 47 MiB
before its 400. The parts are now counted before any is read, and the bytes as they are
read: the first part past the bound is refused, the rest never read.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import attrs
import pytest

from tests.server.support import Api
from tests.server.test_content_parts import body, image, png
from turnstate.server._content import MAX_PARTS


@pytest.fixture
def reads(api: Api) -> Iterator[list[tuple[str, int, int]]]:
    """Every stored part the store is asked for."""
    store, seen = api.services.store, []
    load = store.load_media_part

    async def counted(chat_id: str, seq: int, index: int, **kwargs: Any) -> Any:
        seen.append((chat_id, seq, index))
        return await load(chat_id, seq, index, **kwargs)

    store.load_media_part = counted  # type: ignore[method-assign]
    yield seen
    store.load_media_part = load  # type: ignore[method-assign]


async def _stored_picture(api: Api, picture: bytes) -> tuple[str, dict[str, Any]]:
    chat = await api.new_chat()
    response = await api.call("POST", f"/api/chats/{chat}/turns",
                              json=body("what is this?", content=[image(picture)]))
    assert response.status == 200, await response.text()
    await response.read()
    history = await api.json("GET", f"/api/ui-messages/{chat}")
    return chat, history[0]["parts"][1]  # the file part naming the stored image


async def _send(api: Api, chat: str, parts: list[dict[str, Any]]) -> Any:
    return await api.call("POST", "/api/ui-messages", json={
        "id": chat, "messages": [{"id": "m", "role": "user", "parts": parts}],
        "trigger": "submit-message", "provider": "openai", "model": "gpt-4o"})


async def test_more_parts_than_a_turn_takes_are_refused_before_any_is_read(
        api: Api, reads: list[tuple[str, int, int]]) -> None:
    chat, stored = await _stored_picture(api, png())
    response = await _send(api, chat, [{"type": "text", "text": "again"}] + [stored] * 200)
    assert response.status == 400
    assert (await response.json())["field"] == "messages[0].parts"
    assert reads == []
    response = await _send(api, chat, [stored] * MAX_PARTS)  # as many as a turn takes
    assert response.status == 200, await response.text()
    await response.read()
    assert len(reads) == MAX_PARTS


async def test_parts_past_the_inline_bound_are_refused_as_they_are_read(
        api: Api, reads: list[tuple[str, int, int]]) -> None:
    picture = png(64, 64) + bytes(4000)  # trailing bytes: still a PNG to the checks
    chat, stored = await _stored_picture(api, picture)
    engine = api.services.engine
    engine.limits = attrs.evolve(engine.limits, max_inline_bytes=3 * len(picture))
    inline = image(picture)
    sent = {"type": "file", "mediaType": "image/png",
            "url": f"data:image/png;base64,{inline['data']}"}
    response = await _send(api, chat, [sent] + [stored] * 20)
    assert response.status == 413
    problem = await response.json()
    assert problem["error"] == "content_too_large"
    assert problem["field"] == "messages[0].parts[3].url"  # the third stored one
    assert len(reads) == 3
