"""Two ``turnstate serve`` processes on one PostgreSQL schema (issue 21, "done when").

A turn starts on node A; its client leaves after the first event and resumes on node B
with ``Last-Event-ID``: the resumed stream is exactly the rest, against a client that
never left, and the turn commits once. A stop sent to node B ends a turn hanging on node
A within one heartbeat (10 s with the default 30 s lease; the notification makes it
much faster), its partial text stored and marked stopped, the lease free: the chat's
next turn succeeds. The same through one SQLite process runs in ``test_resume.py``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from tests import pg_support
from tests.server.support import SseEvent, parse_sse
from tests.server.test_process import ServeProcess, serving
from turnstate.storage import PostgresStore

SCHEMA = f"{pg_support.SCHEMA}_nodes"
AUTH = {"Authorization": "Bearer alice-token"}
TURN = {"provider": "openai", "model": "gpt-4o"}
HEARTBEAT_SECONDS = 10.0


@pytest.fixture
async def nodes(pg_schema: str, tmp_path: Path) -> AsyncIterator[tuple[ServeProcess, ...]]:
    (tmp_path / "tokens").write_text("alice: alice-token\n")
    db = f"{pg_support.DSN}?schema={SCHEMA}"
    tokens = ("--tokens", str(tmp_path / "tokens"), "--db", db)
    # The second node starts once the first migrated the schema.
    async with serving(tmp_path, *tokens) as a, serving(tmp_path, *tokens) as b:
        yield a, b


async def _until(response: aiohttp.ClientResponse, kind: str) -> list[SseEvent]:
    text = ""
    while True:
        text += (await response.content.readuntil(b"\n\n")).decode()
        events, _ = parse_sse(text)
        if events and events[-1].event == kind:
            return events


async def test_two_nodes_resume_a_stream_and_stop_a_turn_of_the_other(
        nodes: tuple[ServeProcess, ServeProcess]) -> None:
    a, b = nodes
    async with aiohttp.ClientSession(headers=AUTH) as http:
        chat_id = (await (await http.post(a.url + "api/chats")).json())["id"]
        fault = {"provider": "openai", "kind": "stall", "seconds": 1.5}
        assert (await http.post(a.url + "api/emulator/faults", json=fault)).status == 200
        leaving = await http.post(f"{a.url}api/chats/{chat_id}/turns",
                                  json={**TURN, "text": "one"})
        turn_id = leaving.headers["X-Turn-Id"]
        seen = await _until(leaving, "state_changed")
        events_path = f"api/chats/{chat_id}/turns/{turn_id}/events"
        staying = await http.get(b.url + events_path + "?after=0")  # never leaves
        leaving.close()
        resumed = await http.get(b.url + events_path, headers={"Last-Event-ID": seen[-1].id})
        full, _ = parse_sse(await staying.text())
        rest, _ = parse_sse(await resumed.text())
        assert full[-1].event == "turn_completed"
        assert [e.id for e in seen + rest] == [e.id for e in full]
        assert seen + rest == full

        hang = {"provider": "openai", "kind": "hang", "after_events": 6}
        assert (await http.post(a.url + "api/emulator/faults", json=hang)).status == 200
        running = await http.post(f"{a.url}api/chats/{chat_id}/turns",
                                  json={**TURN, "text": "two"})
        stopped_id = running.headers["X-Turn-Id"]
        shown = await _until(running, "text_delta")
        asked = time.monotonic()
        stop = await http.post(f"{b.url}api/chats/{chat_id}/turns/{stopped_id}/stop")
        assert stop.status == 202
        rest, _ = parse_sse(await running.text())
        took = time.monotonic() - asked
        assert took < HEARTBEAT_SECONDS, took
        assert rest[-1].event == "turn_aborted" and rest[-1].data["reason"] == "stopped"
        streamed = "".join(e.data["text"] for e in shown + rest if e.event == "text_delta")
        again = await http.post(f"{a.url}api/chats/{chat_id}/turns", json={**TURN,
                                                                          "text": "three"})
        assert parse_sse(await again.text())[0][-1].event == "turn_completed"
    async with PostgresStore.open(pg_support.DSN, schema=SCHEMA) as store:
        turns = await store.list_turns(chat_id)
        assert [(t.status.value, t.reason) for t in turns] == [
            ("completed", None), ("aborted", "stopped"), ("completed", None)]
        messages = await store.list_messages(chat_id)
        assert [m.status.value for m in messages] == ["completed"] * 2 + ["aborted"] * 2 + [
            "completed"] * 2
        assert messages[3].text() == streamed and streamed
        assert (await store.load_chat(chat_id)).active_turn_id is None
    print(f"stop across nodes took {took * 1000:.0f} ms")


async def test_the_stop_reaches_the_other_node_by_polling_without_notifications(
        nodes: tuple[ServeProcess, ServeProcess]) -> None:
    """A stop recorded with no notification at all (written straight into the table)
    still ends the turn on its node: the node polls its turns' stop requests."""
    a, _ = nodes
    async with aiohttp.ClientSession(headers=AUTH) as http:
        chat_id = (await (await http.post(a.url + "api/chats")).json())["id"]
        hang = {"provider": "openai", "kind": "hang", "after_events": 6}
        assert (await http.post(a.url + "api/emulator/faults", json=hang)).status == 200
        running = await http.post(f"{a.url}api/chats/{chat_id}/turns",
                                  json={**TURN, "text": "quiet"})
        turn_id = running.headers["X-Turn-Id"]
        await _until(running, "text_delta")
        async with PostgresStore.open(pg_support.DSN, schema=SCHEMA) as store:
            await store.fetch_raw("INSERT INTO turn_logs (turn_id, stop_requested_at) "
                                  "VALUES ($1, now()) ON CONFLICT (turn_id) DO UPDATE SET "
                                  "stop_requested_at = now()", [turn_id])
        async with asyncio.timeout(HEARTBEAT_SECONDS):
            rest, _ = parse_sse(await running.text())
        assert rest[-1].data["reason"] == "stopped"
