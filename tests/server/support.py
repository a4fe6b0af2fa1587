"""A small client for the server tests: authenticated calls and SSE parsing."""

from __future__ import annotations

import json
from typing import Any

import attrs
from aiohttp import ClientResponse
from aiohttp.test_utils import TestClient

from turnstate.emulators._emulated import EmulatedProviders
from turnstate.server import Services


@attrs.frozen
class SseEvent:
    event: str
    data: dict[str, Any]
    id: str | None = None


def parse_sse(text: str) -> tuple[list[SseEvent], int]:
    """Events and the number of comment (heartbeat) lines in a whole SSE body."""
    events, comments = [], 0
    for block in text.replace("\r\n", "\n").split("\n\n"):
        name, data, event_id = "message", [], None
        for line in block.split("\n"):
            if line.startswith(":"):
                comments += 1
            elif line.startswith("id: "):
                event_id = line[len("id: "):]
            elif line.startswith("event: "):
                name = line[len("event: "):]
            elif line.startswith("data: "):
                data.append(line[len("data: "):])
        if data:
            events.append(SseEvent(event=name, data=json.loads("\n".join(data)), id=event_id))
    return events, comments


def turn_body(text: str = "hello", **changes: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"provider": "openai", "model": "gpt-4o", "text": text,
                            "system_prompt": "You are terse."}
    body.update(changes)
    return body


@attrs.define
class Api:
    client: TestClient  # type: ignore[type-arg]
    services: Services
    stack: EmulatedProviders

    def headers(self, owner: str = "alice") -> dict[str, str]:
        return {"Authorization": f"Bearer {owner}-token"}

    async def call(self, method: str, path: str, owner: str = "alice",
                   **kwargs: Any) -> ClientResponse:
        headers = {**self.headers(owner), **kwargs.pop("headers", {})}
        return await self.client.request(method, path, headers=headers, **kwargs)

    async def json(self, method: str, path: str, owner: str = "alice", status: int = 200,
                   **kwargs: Any) -> Any:
        response = await self.call(method, path, owner, **kwargs)
        assert response.status == status, await response.text()
        return await response.json()

    async def new_chat(self, owner: str = "alice") -> str:
        return str((await self.json("POST", "/api/chats", owner, status=201))["id"])

    async def turn(self, chat_id: str, owner: str = "alice", **body: Any) -> list[SseEvent]:
        response = await self.call("POST", f"/api/chats/{chat_id}/turns", owner,
                                   json=turn_body(**body))
        assert response.status == 200, await response.text()
        assert response.headers["Content-Type"].startswith("text/event-stream")
        events, _ = parse_sse(await response.text())
        return events
