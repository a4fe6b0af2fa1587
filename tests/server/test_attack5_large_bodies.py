"""A turn whose body is larger than ``max_body_bytes`` (inline images and PDFs) holds
one of its owner's ``max_large_bodies_per_owner`` slots from before its body is read to
the turn's end: without it, 32 turns of a 20 MiB image from one token took a server
process from 52 MiB to 2.6 GiB (each turn holding ~80 MiB while it ran). Past the bound
the request is a 429 ``too_many_large_bodies`` answered before its body is read; small
turns and other owners are not refused; a refused or finished turn gives its slot back."""

from __future__ import annotations

import asyncio
import base64

import pytest

from tests.server.support import Api, turn_body
from tests.server.test_attack_limits import _status_before_the_body
from tests.server.test_resume import read_until, start
from turnstate.emulators._base import Fault
from turnstate.server import ServerConfig

LARGE = ServerConfig(max_body_bytes=64 * 1024, max_content_bytes=256 * 1024,
                     max_text_chars=2_000, max_large_bodies_per_owner=1)
PNG = b"\x89PNG\r\n\x1a\n" + bytes(100 * 1024)
IMAGE = [{"type": "image", "mediaType": "image/png", "data": base64.b64encode(PNG).decode()}]


def _large(**changes: object) -> dict[str, object]:
    return turn_body("look", content=IMAGE, **changes)


async def _refused(api: Api, path: str, body: dict[str, object], owner: str = "alice") -> None:
    response = await api.call("POST", path, owner, json=body)
    assert response.status == 429, await response.text()
    assert (await response.json())["error"] == "too_many_large_bodies"
    assert response.headers["Retry-After"] == "2"


@pytest.mark.parametrize("config", [LARGE])
async def test_an_owner_runs_one_large_turn_at_a_time_and_nothing_else_is_refused(
        api: Api) -> None:
    first, second, other = [await api.new_chat() for _ in range(3)]
    gate = asyncio.Event()
    held, _ = await start(api, first, Fault(gate=gate), text="look", content=IMAGE)
    await read_until(held, "state_changed")
    await _refused(api, f"/api/chats/{second}/turns", _large())
    ui = {"id": second, "provider": "openai", "model": "gpt-4o", "messages": [
        {"role": "user", "parts": [{"type": "text", "text": "look"}, {
            "type": "file", "mediaType": "image/png",
            "url": "data:image/png;base64," + IMAGE[0]["data"]}]}]}
    await _refused(api, "/api/ui-messages", ui)
    # refused before its body is read: the status comes with the headers alone
    assert await _status_before_the_body(api, f"/api/chats/{second}/turns") == 429
    assert await api.services.store.list_turns(second) == ()
    assert (await api.turn(second, text="small"))[-1].event == "turn_completed"
    bob = await api.new_chat("bob")
    assert (await api.turn(bob, "bob", content=IMAGE))[-1].event == "turn_completed"
    gate.set()
    assert (await read_until(held, "turn_completed"))[-1].event == "turn_completed"
    for _ in range(100):  # the slot comes back with the turn's end, a loop step later
        if not api.services.limits.large:
            break
        await asyncio.sleep(0)
    assert (await api.turn(other, content=IMAGE))[-1].event == "turn_completed"
    assert api.services.limits.large == {} and api.services.limits.large_turns == {}


@pytest.mark.parametrize("config", [LARGE])
async def test_a_large_turn_refused_gives_its_slot_back(api: Api) -> None:
    chat_id = await api.new_chat()
    response = await api.call("POST", f"/api/chats/{chat_id}/turns",
                              json=_large(provider="nobody"))
    assert response.status == 400
    response = await api.call("POST", "/api/chats/no-such-chat/turns", json=_large())
    assert response.status == 404
    assert api.services.limits.large == {} and api.services.limits.large_turns == {}
    assert (await api.turn(chat_id, content=IMAGE))[-1].event == "turn_completed"
