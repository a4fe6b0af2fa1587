"""The UI message stream keeps an idle connection alive as a turn's stream does.

``POST /api/ui-messages`` answered with a plain stream: nothing went out while the turn
waited (a slow provider, a long tool), so a proxy's idle timeout cut it, and a reader
that stopped reading held its handler for as long as the turn ran, with no send
timeout. It is now a turn's stream (``TurnStream``): ``: ping`` comments, which the
SDK's event-stream parser skips, and the send timeout.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from tests.server.support import Api
from turnstate.emulators._base import Fault
from turnstate.server import ServerConfig


@pytest.mark.parametrize("config", [ServerConfig(heartbeat_seconds=0.05)])
async def test_an_idle_ui_message_stream_gets_heartbeat_comments(api: Api) -> None:
    chat = await api.new_chat()
    gate = asyncio.Event()
    api.stack.emulators["openai"].faults.push(Fault(gate=gate))
    response = await api.call("POST", "/api/ui-messages", json={
        "id": chat, "provider": "openai", "model": "gpt-4o",
        "messages": [{"role": "user", "parts": [{"type": "text", "text": "hi"}]}]})
    assert response.status == 200
    assert response.headers["x-vercel-ai-ui-message-stream"] == "v1"
    async with asyncio.timeout(30):  # a bound for the old code, which never pinged
        frames = [await response.content.readuntil(b"\n\n") for _ in range(2)]
        while not frames[-1].startswith(b":"):
            frames.append(await response.content.readuntil(b"\n\n"))
    assert frames[-1] == b": ping\n\n"
    gate.set()
    body = (await response.text()).split("\n\n")
    chunks = [json.loads(f[len("data: "):]) for f in body if f.startswith("data: {")]
    assert body[-2] == "data: [DONE]" and chunks[-1] == {"type": "finish",
                                                          "finishReason": "stop"}
