"""Following one turn from outside (helper "follow7"): the real ``ai`` client in
several tabs, a stop from another tab, a tab joining after the end; and the resume
route from every point of a finished turn's log."""

from __future__ import annotations

import asyncio
import json

from tests.server.support import Api, parse_sse
from tests.server.test_ai_sdk import HERE, pytestmark, sdk_reconnected, stored
from turnstate.emulators._base import Fault

__all__ = ["pytestmark"]


async def _stalled_turn(api: Api) -> tuple[str, str]:
    """A turn started by one tab, its model's stream stalled after a few chunks, that
    tab's connection dropped once the turn runs."""
    chat = await api.new_chat()
    api.stack.emulators["openai"].faults.push(Fault(stall_after=3))
    started = await api.call("POST", "/api/ui-messages", json={
        "id": chat, "messages": [{"role": "user", "parts": [
            {"type": "text", "text": "tell me a long story about the sea"}]}],
        "provider": "openai", "model": "gpt-4o"})
    text = await started.content.readuntil(b"\n\n")  # its start: the turn runs
    turn_id = json.loads(text.split(b"\n\n")[0][len(b"data: "):])["messageId"]
    started.close()
    return chat, turn_id


async def test_three_tabs_follow_one_turn_and_a_fourth_stops_it(api: Api) -> None:
    chat, turn_id = await _stalled_turn(api)
    tabs = [await sdk_reconnected(api, chat) for _ in range(3)]
    await api.json("POST", f"/api/chats/{chat}/turns/{turn_id}/stop", status=202)
    results = []
    for tab in tabs:
        out, err = await asyncio.wait_for(tab.communicate(), 60)
        assert tab.returncode == 0, err.decode()
        results.append(json.loads(out))
    stored_turn = (await stored(api, chat))[1]
    for result in results:
        assert result["errors"] == []
        assert result["chunks"][-1]["type"] == "abort"
        assert result["message"]["parts"] == results[0]["message"]["parts"]
        assert result["message"]["parts"][-1] == stored_turn["parts"][-1]  # its data-turn
    assert stored_turn["parts"][-1]["data"]["reason"] == "stopped"
    # a tab that joins after the end: no running turn, nothing to replay
    late = await sdk_reconnected_or_none(api, chat)
    assert late["message"] is None and late["errors"] == []


async def sdk_reconnected_or_none(api: Api, chat: str) -> dict[str, object]:
    server = api.client.server
    proc = await asyncio.create_subprocess_exec(
        "node", str(HERE / "read_stream.mjs"), f"http://{server.host}:{server.port}",
        "alice-token", chat, "--reconnect", "{}",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    return json.loads(out)  # type: ignore[no-any-return]


async def test_a_resume_from_every_point_of_an_ended_turn_gets_the_rest(api: Api) -> None:
    """A finished tool turn resumed after each id it sent (and its final one): each
    stream is the tail of the whole one, the same ids and data, and nothing after the
    end."""
    chat = await api.new_chat()
    whole = await api.turn(chat, text='[[call:weather {"city": "Oslo"}]] Weather?',
                           tools=["weather"])
    turn_id = whole[-1].data["turnId"]
    ids = [e.id for e in whole]
    assert whole[-1].event == "turn_completed" and None not in ids
    for index, after in enumerate(ids):
        response = await api.call("GET", f"/api/chats/{chat}/turns/{turn_id}/events",
                                  headers={"Last-Event-ID": str(after)})
        assert response.status == 200, await response.text()
        rest, _ = parse_sse(await response.text())
        assert [(e.id, e.event, e.data) for e in rest] == \
            [(e.id, e.event, e.data) for e in whole[index + 1:]], after
