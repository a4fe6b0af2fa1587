"""The real ``ai`` client reconnecting mid-tool-loop (helper "resume4" probe): the
transport's ``reconnectToStream`` replays the running turn from its first event; the
SDK's message equals the stored one, its tool part whole."""

from __future__ import annotations

import asyncio
import json

from tests.server.support import Api
from tests.server.test_ai_sdk import HERE, pytestmark, stored, without_progress
from turnstate.emulators._base import Fault

__all__ = ["pytestmark"]


async def test_the_sdk_reconnects_between_a_tool_result_and_the_next_request(
        api: Api) -> None:
    chat = await api.new_chat()
    gate = asyncio.Event()
    api.stack.emulators["openai"].faults.push(Fault(), Fault(gate=gate))
    started = await api.call("POST", "/api/ui-messages", json={
        "id": chat, "messages": [{"role": "user", "parts": [{"type": "text", "text":
                                  '[[call:weather {"city": "Lisbon"}]] Weather?'}]}],
        "provider": "openai", "model": "gpt-4o", "tools": ["weather"]})
    text = b""
    while b"tool-output-available" not in text:
        text += await started.content.readuntil(b"\n\n")
    started.close()  # the connection drops after the tool's result
    server = api.client.server
    proc = await asyncio.create_subprocess_exec(
        "node", str(HERE / "read_stream.mjs"), f"http://{server.host}:{server.port}",
        "alice-token", chat, "--reconnect", "{}",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    assert proc.stderr is not None
    assert (await asyncio.wait_for(proc.stderr.readline(), 60)) == b"connected\n"
    gate.set()
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    resumed = json.loads(out)
    assert resumed["errors"] == []
    history = await stored(api, chat)
    assert without_progress(resumed["message"]) == history[1]
    call = next(p for p in resumed["message"]["parts"] if p["type"] == "tool-weather")
    assert call["state"] == "output-available"


async def test_the_sdk_reconnects_mid_reasoning_and_the_stop_ends_its_message(
        api: Api) -> None:
    """The model's stream stalls inside its reasoning; the client's connection drops;
    the SDK reconnects, a stop ends the turn: its message has the reasoning streamed so
    far and the stored turn's outcome (the stored answer of a stopped turn keeps its text
    but not its reasoning: an engine rule, not the stream's)."""
    chat = await api.new_chat()
    api.stack.emulators["deepseek"].faults.push(Fault(stall_after=3))
    started = await api.call("POST", "/api/ui-messages", json={
        "id": chat, "messages": [{"role": "user", "parts": [
            {"type": "text", "text": "[[think]] think hard about this"}]}],
        "provider": "deepseek", "model": "deepseek-reasoner"})
    text = b""
    while b"reasoning-delta" not in text:
        text += await started.content.readuntil(b"\n\n")
    turn_id = json.loads(text.split(b"\n\n")[0][len(b"data: "):])["messageId"]
    started.close()
    server = api.client.server
    proc = await asyncio.create_subprocess_exec(
        "node", str(HERE / "read_stream.mjs"), f"http://{server.host}:{server.port}",
        "alice-token", chat, "--reconnect", "{}",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    assert proc.stderr is not None
    assert (await asyncio.wait_for(proc.stderr.readline(), 60)) == b"connected\n"
    await api.json("POST", f"/api/chats/{chat}/turns/{turn_id}/stop", status=202)
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    resumed = json.loads(out)
    assert [c["type"] for c in resumed["chunks"]][-1] == "abort"
    assert "reasoning" in [p["type"] for p in resumed["message"]["parts"]]
    parts = resumed["message"]["parts"]
    assert resumed["errors"] == []
    assert parts[-1] == (await stored(api, chat))[1]["parts"][-1]  # its data-turn
    assert parts[-1]["data"]["reason"] == "stopped"
