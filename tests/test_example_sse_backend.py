"""``examples/sse_backend.py``, the runnable embedder example, run as a client would:
a turn with an image, per-turn settings and a tool call streamed as SSE; its costs; a
resume after ``Last-Event-ID``; a stop of a turn waiting on its provider; typed errors
as HTTP answers. The example imports only names of the package root (checked)."""

from __future__ import annotations

import ast
import asyncio
import base64
import importlib.util
import json
from collections.abc import AsyncIterator
from decimal import Decimal
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

import turnstate
from turnstate import AiohttpTransport, SqliteStore
from turnstate.emulators import EmulatedProviders, Fault
from turnstate.testing import emulated_providers  # noqa: F401  (the fixture)

EXAMPLE = Path(__file__).parent.parent / "examples" / "sse_backend.py"
PNG = base64.b64encode(bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000001e221bc330000000049454e44ae426082"
)).decode()


def example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("sse_backend", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
async def http(emulated_providers: EmulatedProviders,  # noqa: F811
               tmp_path: Path) -> AsyncIterator[TestClient[Any, Any]]:
    async with AiohttpTransport() as transport, \
            SqliteStore.open(str(tmp_path / "chats.sqlite")) as store:
        app = example().build(store, emulated_providers.adapters, transport)
        async with TestClient(TestServer(app)) as client:
            yield client


def sse(text: str) -> list[tuple[int | None, str, Any]]:
    events = []
    for block in text.strip().split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.split("\n"))
        events.append((int(fields["id"]) if "id" in fields else None, fields["event"],
                       json.loads(fields["data"])))
    return events


def test_the_example_imports_only_the_package_roots_public_names() -> None:
    tree = ast.parse(EXAMPLE.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "turnstate":
            assert {a.name for a in node.names} <= set(turnstate.__all__)
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("turnstate"):
            assert node.module == "turnstate.emulators"  # the manual run's providers only


async def test_a_turn_with_an_image_settings_and_a_tool_then_its_cost_and_resume(
        http: TestClient[Any, Any]) -> None:
    chat = (await (await http.post("/chats")).json())["id"]
    answer = await http.post(f"/chats/{chat}/turns", json={
        "provider": "anthropic", "model": "claude-sonnet-4-5", "system": "Be brief.",
        "text": "what time is it? [[call:utc_now]]", "turnId": "turn-1",
        "images": [{"mediaType": "image/png", "base64": PNG}],
        "settings": {"temperature": 0.2, "maxOutputTokens": 300}})
    assert answer.status == 200 and answer.headers["X-Turn-Id"] == "turn-1"
    events = sse(await answer.text())
    kinds = [kind for _, kind, _ in events]
    assert "tool_call" in kinds and "tool_result" in kinds, kinds
    assert kinds[-1] == "turn_completed"
    ids = [event_id for event_id, _, _ in events]
    assert ids == list(range(1, len(events) + 1))
    final = events[-1][2]
    cost = Decimal(final["stats"]["cost"]["total"])
    view = await (await http.get(f"/chats/{chat}")).json()
    assert [m["role"] for m in view["messages"]] == ["user", "assistant"]
    assert Decimal(view["costUsd"]) == cost > 0
    # a client that lost its stream after event 2 resumes with the rest
    rest = await http.get(f"/chats/{chat}/turns/turn-1/events",
                          headers={"Last-Event-ID": "2"})
    assert [e[0] for e in sse(await rest.text())] == ids[2:]


async def test_a_stop_from_another_request_ends_the_streamed_turn(
        http: TestClient[Any, Any], emulated_providers: EmulatedProviders,  # noqa: F811
) -> None:
    chat = (await (await http.post("/chats")).json())["id"]
    gate = asyncio.Event()
    emulated_providers.emulators["openai"].faults.push(Fault(gate=gate))
    # the headers come once the turn's first event is out; its call then waits at the gate
    answer = await http.post(f"/chats/{chat}/turns", json={
        "provider": "openai", "model": "gpt-4o", "text": "hello", "turnId": "turn-2"})
    stopped = await http.post(f"/chats/{chat}/turns/turn-2/stop")
    assert (await stopped.json())["status"] == "in_progress"
    final = sse(await answer.text())[-1]
    assert final[1] == "turn_aborted" and final[2]["reason"] == "stopped"
    gate.set()
    again = await http.post(f"/chats/{chat}/turns/turn-2/stop")
    assert (await again.json()) == {"status": "finished", "reason": "stopped"}


async def test_typed_errors_become_http_answers(http: TestClient[Any, Any]) -> None:
    chat = (await (await http.post("/chats")).json())["id"]
    bad = await http.post(f"/chats/{chat}/turns", json={
        "provider": "openai", "model": "gpt-4o", "text": "hi",
        "images": [{"mediaType": "image/png", "base64": "%%%"}]})
    assert bad.status == 400 and (await bad.json())["field"] == "images[0].base64"
    missing = await http.post("/chats/nope/turns", json={
        "provider": "openai", "model": "gpt-4o", "text": "hi"})
    assert missing.status == 404


async def test_a_turn_running_at_shutdown_ends_cancelled_before_the_store_closes(
        emulated_providers: EmulatedProviders, tmp_path: Path) -> None:  # noqa: F811
    """The example closes its engine at the app's cleanup (embedder3): before, a turn
    waiting on its provider ran on after the store had closed, its end never recorded."""
    gate = asyncio.Event()
    emulated_providers.emulators["openai"].faults.push(Fault(gate=gate))
    async with AiohttpTransport() as transport, \
            SqliteStore.open(str(tmp_path / "chats.sqlite")) as store:
        app = example().build(store, emulated_providers.adapters, transport)
        async with TestClient(TestServer(app)) as client:
            chat = (await (await client.post("/chats")).json())["id"]
            answer = await client.post(f"/chats/{chat}/turns", json={
                "provider": "openai", "model": "gpt-4o", "text": "hello",
                "turnId": "turn-3"})
            reading = asyncio.create_task(answer.text())
            await client.server.close()  # the app's shutdown: the engine closes
            final = sse(await reading)[-1]
        record = await store.load_turn("turn-3")
        assert (record.status.value, record.reason) == ("aborted", "cancelled")
        assert final[1] == "turn_aborted" and final[2]["reason"] == "cancelled"
        assert (await store.load_chat(chat)).active_turn_id is None
    gate.set()
