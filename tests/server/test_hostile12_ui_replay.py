"""A UI message stream writes a long turn's events in slices, not one write each
(hostile12).

``_send_ui`` wrote every event of the turn on its own: a replay of a long turn (a
retried ``POST /api/ui-messages``, answered from the turn's log) or the transport's
reconnect to a running one made a write, and a system call, per event. A 49,000-word
answer's replay took 0.51 s of the server's CPU, nine times what the same turn's
``GET .../events`` takes (60 ms); in slices (``_sse.slices``) it takes 0.23 s.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.server.support import Api
from turnstate.server import ServerConfig
from turnstate.server._sse import TurnStream

WORDS = 5_000


@pytest.fixture
def config() -> ServerConfig:
    return ServerConfig(max_body_bytes=64 * 1024, max_content_bytes=256 * 1024,
                        max_text_chars=2 * WORDS + 20)


async def test_a_replayed_ui_stream_of_a_long_turn_is_a_few_writes_of_the_same_bytes(
        api: Api, monkeypatch: pytest.MonkeyPatch) -> None:
    chat = await api.new_chat()
    body = {"id": chat, "provider": "openai", "model": "gpt-4o", "messages": [
        {"id": "m-1", "role": "user", "parts": [
            {"type": "text", "text": "[[say:" + "a_" * WORDS + "]]"}]}]}
    first = await api.call("POST", "/api/ui-messages", json=body)
    streamed = await first.text()
    assert first.status == 200 and streamed.count('"text-delta"') >= WORDS
    writes: list[int] = []
    send, finish = TurnStream.send, TurnStream.finish

    async def counted_send(self: TurnStream, data: bytes) -> None:
        writes.append(len(data))
        await send(self, data)

    async def counted_finish(self: TurnStream, data: bytes) -> None:
        writes.append(len(data))
        await finish(self, data)

    monkeypatch.setattr(TurnStream, "send", counted_send)
    monkeypatch.setattr(TurnStream, "finish", counted_finish)
    again: Any = await api.call("POST", "/api/ui-messages", json=body)  # a retry
    assert again.headers["Idempotent-Replayed"] == "true"
    assert await again.text() == streamed  # the same chunks
    assert len(writes) < 20, len(writes)  # was one an event: some 5,000
