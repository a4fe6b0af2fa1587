"""An embedder's own aiohttp chat backend, written from the README and docs/api.md only.

It streams a turn's events as SSE with ``event_json`` (an event's ``attrs.asdict`` does
not encode: ``TurnStats.cost`` holds Decimals), switches provider, model and system
prompt mid-chat, and shows a chat's history and cost with ``chat_cost`` (before, the
cost meant parsing each answer's audit JSON by hand; neither helper was public). Its
store is a subclass of ``SqliteStore`` of its own.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from turnstate import (
    AiohttpTransport,
    SqliteStore,
    TurnEngine,
    TurnInput,
    TurnStats,
    chat_cost,
    event_json,
    message_cost,
)
from turnstate.emulators import EmulatedProviders
from turnstate.storage import TurnLease, TurnStart
from turnstate.testing import emulated_providers  # noqa: F401  (the fixture)


class CountingStore(SqliteStore):
    """The embedder's store: SQLite, counting the turns it begins."""

    begun = 0

    async def begin_turn(self, chat_id: str, start: TurnStart, *,
                         owner: str | None = None) -> TurnLease:
        lease = await super().begin_turn(chat_id, start, owner=owner)
        type(self).begun += 1
        return lease


def app_for(engine: TurnEngine) -> web.Application:
    async def post_message(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        turn = TurnInput(provider=body["provider"], model=body["model"],
                         system_prompt=body["system"], user_text=body["text"])
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        async for event in engine.run_turn(request.match_info["chat"], turn):
            await response.write(f"event: {event.type}\ndata: {event_json(event)}\n\n".encode())
        await response.write_eof()
        return response

    async def get_chat(request: web.Request) -> web.Response:
        messages = await engine.store.list_messages(request.match_info["chat"])
        cost = chat_cost(messages)
        return web.json_response({
            "messages": [{"role": m.role, "text": m.text(),
                          "cost": None if (c := message_cost(m)) is None else str(c.total)}
                         for m in messages],
            "cost": None if cost is None else str(cost.total)})

    app = web.Application()
    app.router.add_post("/chats/{chat}/messages", post_message)
    app.router.add_get("/chats/{chat}", get_chat)
    return app


@pytest.fixture
async def client(emulated_providers: EmulatedProviders,  # noqa: F811
                 tmp_path: Path) -> AsyncIterator[tuple[TestClient[Any, Any], TurnEngine]]:
    async with AiohttpTransport() as transport, \
            CountingStore.open(str(tmp_path / "chats.sqlite")) as store:
        engine = TurnEngine(store, emulated_providers.adapters, transport)
        async with TestClient(TestServer(app_for(engine))) as test_client:
            yield test_client, engine


def sse(text: str) -> list[dict[str, Any]]:
    """The JSON data of each SSE event, checked against its ``event:`` line."""
    found = []
    for block in text.strip().split("\n\n"):
        kind, data = block.split("\n")
        found.append(json.loads(data.removeprefix("data: ")))
        assert kind == f"event: {found[-1]['type']}"
    return found


async def test_an_sse_backend_switches_provider_model_and_prompt_and_shows_the_cost(
        client: tuple[TestClient[Any, Any], TurnEngine]) -> None:
    http, engine = client
    chat = await engine.store.create_chat(owner="alice")
    steps = [("openai", "gpt-4o", "Be brief.", None),
             ("openai", "gpt-4o", "Be brief.", None),  # by cursor
             ("openai", "gpt-4o-mini", "Be brief.", "model_changed"),
             ("openai", "gpt-4o-mini", "Be kind.", "system_prompt_changed"),
             ("anthropic", "claude-sonnet-4-5", "Be kind.", "provider_changed"),
             # a stateless provider stores no cursor: nothing to degrade from
             ("gemini", "gemini-2.5-flash", "Be kind.", None),
             ("deepseek", "deepseek-chat", "Be kind.", "provider_changed"),
             ("openai-compatible", "gpt-4o", "Be kind.", None)]
    total = Decimal(0)
    for number, (provider, model, system, degraded) in enumerate(steps, 1):
        answer = await http.post(f"/chats/{chat.id}/messages", json={
            "provider": provider, "model": model, "system": system, "text": f"turn {number}"})
        events = sse(await answer.text())
        final = events[-1]
        assert final["type"] == "turn_completed", final
        reasons = [e["reason"] for e in events if e["type"] == "continuation_degraded"]
        assert reasons == ([degraded] if degraded else []), (provider, reasons)
        if final["stats"]["cost"] is not None:  # DeepSeek's models are unpriced
            total += Decimal(final["stats"]["cost"]["total"])
        text = "".join(e["text"] for e in events if e["type"] == "text_delta")
        assert f"turn {number}" in text
    view = await (await http.get(f"/chats/{chat.id}")).json()
    assert [m["role"] for m in view["messages"]] == ["user", "assistant"] * len(steps)
    assert Decimal(view["cost"]) == total > 0
    assert CountingStore.begun >= len(steps)


def test_an_events_cost_is_what_event_json_carries() -> None:
    """``attrs.asdict`` of a completed turn's stats does not encode as JSON (Decimals);
    ``event_json`` does, as exact decimal strings."""
    from turnstate import TurnCompleted, TurnCost, Usage

    cost = TurnCost(input=Decimal("0.001"), cached_input=Decimal(0),
                    cache_write=Decimal(0), output=Decimal("0.0025"))
    event = TurnCompleted(turn_id="t", chat_id="c", strategy="replay", degradation=None,
                          path=(), text="hi", stats=TurnStats(
                              requests=1, request_bytes=10, tool_calls=0,
                              usage=Usage(input_tokens=10, output_tokens=5), cost=cost))
    data = json.loads(event_json(event))
    assert data["type"] == "turn_completed"
    assert data["stats"]["cost"]["total"] == "0.0035"
