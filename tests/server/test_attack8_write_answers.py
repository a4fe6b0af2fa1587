"""An edit or a delete is never answered 429 after it was written (attack8).

``PATCH`` and ``DELETE /api/chats/{id}/messages/{seq}`` answer the chat view, which is
larger than 64 KiB for a chat of long messages: a large answer is sent holding one of
the owner's streams (attack4's ``large_answers``). The stream was taken after the
handler had run, so an owner whose streams were all open (its tabs following turns)
got ``429 too_many_streams`` with ``Retry-After`` for a delete the store had already
made: 48 messages before, 46 after, and the retry the 429 invites deletes again from
that seq, by then another turn's messages. Those routes now take their stream before
they run: a 429 means nothing was done.
"""

from __future__ import annotations

import asyncio

import pytest

from tests.server.support import Api
from tests.server.test_resume import read_until, start
from turnstate.emulators._base import Fault
from turnstate.server import ServerConfig

ONE_STREAM = ServerConfig(max_body_bytes=64 * 1024, max_text_chars=30_000,
                          max_streams_per_owner=1)


async def _long_chat(api: Api) -> str:
    chat = await api.new_chat()
    for number in range(4):  # a view of ~117 KB, ~88 KB without the last turn
        await api.turn(chat, text=f"{number} " + "x" * 29_000)
    return chat


async def _texts(api: Api, chat: str) -> list[str]:
    """The stored messages' texts (a view would be a large answer: a stream too)."""
    return [m.text() for m in await api.services.store.list_messages(chat, owner="alice")]


@pytest.mark.parametrize("config", [ONE_STREAM])
async def test_an_edit_or_delete_refused_for_its_stream_changed_nothing(api: Api) -> None:
    chat = await _long_chat(api)
    before = await _texts(api, chat)
    busy = await api.new_chat()
    gate = asyncio.Event()
    response, _ = await start(api, busy, Fault(gate=gate))  # the owner's one stream
    await read_until(response, "state_changed")
    for method, body in (("DELETE", None), ("PATCH", {"text": "changed"})):
        refused = await api.call(method, f"/api/chats/{chat}/messages/7", json=body)
        assert refused.status == 429, refused.status
        assert (await refused.json())["error"] == "too_many_streams"
        assert await _texts(api, chat) == before, f"{method} written, then answered 429"
    gate.set()
    await response.text()
    edited = await api.json("PATCH", f"/api/chats/{chat}/messages/7", json={"text": "changed"})
    assert len(edited["messages"]) == 8 and edited["messages"][6]["parts"][0]["text"] == "changed"
    deleted = await api.json("DELETE", f"/api/chats/{chat}/messages/7")
    assert deleted["deleted"] == 2 and len(deleted["messages"]) == 6
    assert api.services.limits.streams == {}
