"""The real ``ai`` client reconnecting (helper "resume4"): mid-tool-loop and
mid-reasoning the transport's ``reconnectToStream`` replays the running turn from its
first event; joining a turn an embedder iterates, it gets what follows its join."""

from __future__ import annotations

import asyncio
import contextlib
import json

import attrs

from tests.server.support import Api, turn_body
from tests.server.test_ai_sdk import pytestmark, sdk_reconnected, stored, without_progress
from turnstate.emulators._base import Fault
from turnstate.server._turns import turn_input

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
    proc = await sdk_reconnected(api, chat)
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
    proc = await sdk_reconnected(api, chat)
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


async def test_the_sdk_joins_an_embedders_turn_after_its_tool_call(api: Api) -> None:
    """A turn an embedder iterates with ``run_turn`` on the server's engine, joined by
    the transport's reconnect after its tool call went out: the stream starts with the
    tool's result, whose call the SDK never saw. The SDK refused the whole message ("No
    tool invocation found", no parts at all); the result is now left out and the rest of
    the answer shows."""
    chat = await api.new_chat()
    gate = asyncio.Event()
    api.stack.emulators["openai"].faults.push(Fault(), Fault(gate=gate))
    turn = attrs.evolve(turn_input(turn_body(
        '[[call:weather {"city": "Lisbon"}]] Weather?', tools=["weather"]), api.services,
        "alice"), turn_id="t-embedded")
    seen: list[str] = []
    called, joined = asyncio.Event(), asyncio.Event()

    async def consume() -> None:
        async with contextlib.aclosing(api.services.engine.run_turn(chat, turn)) as events:
            async for event in events:
                seen.append(event.type)
                if event.type == "tool_call":  # the turn waits for its consumer: the
                    called.set()  # tool runs, and its result comes, after the join
                    await joined.wait()

    consumer = asyncio.create_task(consume())
    await called.wait()
    proc = await sdk_reconnected(api, chat)
    joined.set()
    gate.set()
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    await consumer
    assert proc.returncode == 0, err.decode()
    joined = json.loads(out)
    assert seen[-1] == "turn_completed"
    assert joined["errors"] == []
    stored_parts = (await stored(api, chat))[1]["parts"]
    answer = next(p for p in stored_parts if p["type"] == "text")["text"]
    texts = [p["text"] for p in joined["message"]["parts"] if p["type"] == "text"]
    assert texts == [answer]
