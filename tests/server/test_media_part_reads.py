"""The media route reads the one part it serves, not the message: a question of eight
4 MiB photos read (and decoded) 32 MiB to serve one of them."""

from __future__ import annotations

import tracemalloc

import attrs

from tests.server.support import Api
from turnstate.core import ImagePart, TextPart
from turnstate.testing._records import commit, start

MIB = 1024 * 1024
PNG = (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + (1200).to_bytes(4, "big")
       + (900).to_bytes(4, "big") + b"\x08\x02\x00\x00\x00")


async def test_serving_one_image_reads_that_image_alone(api: Api) -> None:
    chat_id = await api.new_chat()
    photos = [ImagePart(media_type="image/png", data=PNG + bytes([n]) * 4 * MIB)
              for n in range(8)]
    store = api.services.store
    lease = await store.begin_turn(chat_id, attrs.evolve(
        start("t1"), user_parts=(TextPart(text="look"), *photos)))
    await store.commit_turn(lease, commit("resp_1"))
    path = f"/api/chats/{chat_id}/messages/1/parts/3"
    tracemalloc.start()
    try:
        response = await api.call("GET", path)
        body = await response.read()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert (response.status, body) == (200, photos[2].data)
    assert peak < 4 * (4 * MIB + 64 * 1024), peak  # the photo, copied at most thrice
    missing = await api.call("GET", f"/api/chats/{chat_id}/messages/1/parts/0")
    assert (missing.status, (await missing.json())["error"]) == (404, "part_not_found")
    gone = await api.call("GET", f"/api/chats/{chat_id}/messages/9/parts/1")
    assert gone.status == 404
    other = await api.call("GET", path, "bob")
    assert other.status == 404
