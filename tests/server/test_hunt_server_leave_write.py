"""``--cancel-on-disconnect``: a client whose connection fails under a write also
cancels its turn.

A client that leaves is seen two ways: its connection is lost while the stream waits
(aiohttp cancels the handler), or a write finds the transport closing (a reset seen
while sending: ``ConnectionResetError``). Only the first cancelled the turn; after the
second the turn ran on to its end and committed, against the option's promise.
"""

from __future__ import annotations

import asyncio

import pytest

from tests.server.support import Api, turn_body
from turnstate.emulators._base import Fault
from turnstate.server import ServerConfig
from turnstate.server._sse import TurnStream


@pytest.mark.parametrize("config", [ServerConfig(cancel_on_disconnect=True)])
@pytest.mark.parametrize("route", ["turns", "ui-messages"])
async def test_a_write_to_a_client_that_left_cancels_its_turn(
        api: Api, monkeypatch: pytest.MonkeyPatch, route: str) -> None:
    chat = await api.new_chat()
    gate = asyncio.Event()
    # held until the client is gone, then some events and no end: only a cancel ends it
    api.stack.emulators["openai"].faults.push(Fault(gate=gate, stall_after=6))
    if route == "turns":
        response = await api.call("POST", f"/api/chats/{chat}/turns", json=turn_body())
    else:
        response = await api.call("POST", "/api/ui-messages", json={
            "id": chat, "provider": "openai", "model": "gpt-4o",
            "messages": [{"role": "user", "parts": [{"type": "text", "text": "hi"}]}]})
    await response.content.readuntil(b"\n\n")
    (task,) = api.services.turn_tasks

    async def reset(self: TurnStream, data: bytes) -> None:
        raise ConnectionResetError("Cannot write to closing transport")

    monkeypatch.setattr(TurnStream, "send", reset)
    monkeypatch.setattr(TurnStream, "finish", reset)
    gate.set()  # the provider answers: the next write finds the client gone
    await asyncio.gather(task, return_exceptions=True)
    async with asyncio.timeout(30):  # the old code left the turn hanging at its provider
        await api.services.engine.detached.settled()
    (turn,) = await api.services.store.list_turns(chat)
    assert (turn.status, turn.reason) == ("aborted", "cancelled")
    response.close()
