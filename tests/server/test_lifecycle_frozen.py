"""A node frozen (SIGSTOP) past its lease mid-turn, then woken (helper "lifecycle").

Two ``turnstate serve`` processes share one store (an SQLite file, or a PostgreSQL
schema). Node A runs a turn whose provider answers late; A is frozen with SIGSTOP,
node B takes the chat once A's lease has run out and starts a turn of its own, also
answered late, and A is woken (SIGCONT) while B's turn is in flight. A's turn must end
``lease_lost`` on A's stream (a whole body, not cut), its late writes fenced: B's turn
commits untouched, A's stays aborted with both its messages, the chat ends free and a
resume of A's turn on either node ends with a final event.

A guard for the keeper's rule that a lease is over once its deadline has passed (a
process frozen longer than its lease does not renew on waking), and for the fences.
"""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests import pg_support
from tests.server.support import SseEvent, parse_sse
from tests.server.test_process import ServeProcess, serving
from turnstate.storage import TurnStatus, open_store

LEASE = 1.0
BOUND = 30.0  # every wait fails clearly after this many seconds
HEADERS = {"Authorization": "Bearer alice-token"}
TURN = {"provider": "openai", "model": "gpt-4o", "text": "hello"}


async def _json(session: aiohttp.ClientSession, method: str, url: str,
                **kwargs: Any) -> Any:
    async with session.request(method, url, headers=HEADERS, **kwargs) as response:
        assert response.status < 300, await response.text()
        return await response.json()


async def _stall(session: aiohttp.ClientSession, node: ServeProcess, seconds: float) -> None:
    await _json(session, "POST", f"{node.url}api/emulator/faults",
                json={"provider": "openai", "kind": "stall", "seconds": seconds})


async def _taken_on(session: aiohttp.ClientSession, node: ServeProcess,
                    chat_id: str) -> aiohttp.ClientResponse:
    """Start a turn on ``node`` as soon as the chat is free (the frozen node's lease is a
    time-based fact: polled); the open response."""
    while True:
        response = await session.post(f"{node.url}api/chats/{chat_id}/turns", json=TURN,
                                      headers=HEADERS)
        if response.status == 200:
            return response
        assert response.status == 409, await response.text()
        response.release()
        await asyncio.sleep(0.05)


async def _resumed(session: aiohttp.ClientSession, node: ServeProcess, chat_id: str,
                   turn_id: str) -> list[SseEvent]:
    async with session.get(f"{node.url}api/chats/{chat_id}/turns/{turn_id}/events",
                           headers=HEADERS) as response:
        assert response.status == 200, await response.text()
        events, _ = parse_sse(await response.text())
    return events


@pytest.fixture(params=["sqlite", "postgres"])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "serve.sqlite")
    request.getfixturevalue("pg_schema")
    joiner = "&" if "?" in pg_support.DSN else "?"
    return f"{pg_support.DSN}{joiner}schema={pg_support.SCHEMA}_frozen"


async def test_a_node_frozen_past_its_lease_is_fenced_when_it_wakes(
        database: str, tmp_path: Path) -> None:
    (tmp_path / "tokens").write_text("alice: alice-token\n")
    (tmp_path / "tokens").chmod(0o600)
    options = ("--tokens", str(tmp_path / "tokens"), "--lease-seconds", str(LEASE),
               "--db", database)
    async with serving(tmp_path, *options) as node_a, serving(tmp_path, *options) as node_b, \
            aiohttp.ClientSession() as session:
        chat_id = (await _json(session, "POST", f"{node_a.url}api/chats"))["id"]
        async with asyncio.timeout(BOUND):
            await _stall(session, node_a, 10)  # past the freeze, however long it lasts
            stream_a = await session.post(f"{node_a.url}api/chats/{chat_id}/turns",
                                          json=TURN, headers=HEADERS)
            assert stream_a.status == 200, await stream_a.text()
            turn_a = stream_a.headers["X-Turn-Id"]
            await stream_a.content.readuntil(b"\n\n")  # A holds the chat, waiting
            node_a.proc.send_signal(signal.SIGSTOP)
            try:
                await _stall(session, node_b, 3)
                stream_b = await _taken_on(session, node_b, chat_id)
            finally:
                node_a.proc.send_signal(signal.SIGCONT)  # B's turn is in flight
            turn_b = stream_b.headers["X-Turn-Id"]
            rest_a, _ = parse_sse((await stream_a.content.read()).decode())
            events_b, _ = parse_sse(await stream_b.text())
            resumed = [await _resumed(session, node, chat_id, turn_a)
                       for node in (node_a, node_b)]
    assert rest_a[-1].event == "turn_aborted", rest_a[-1:]
    assert rest_a[-1].data["reason"] == "lease_lost", rest_a[-1]
    assert not any(e.event == "text_delta" for e in rest_a)  # A sent nothing more
    assert events_b[-1].event == "turn_completed", events_b[-1:]
    for events in resumed:
        assert events[-1].event == "turn_aborted", events[-1:]
    async with open_store(database) as store:
        chat = await store.load_chat(chat_id)
        assert chat.active_turn_id is None and chat.version == 1
        record_a, record_b = await store.load_turn(turn_a), await store.load_turn(turn_b)
        assert record_a.status is TurnStatus.ABORTED
        assert record_b.status is TurnStatus.COMPLETED
        messages = await store.list_messages(chat_id)
        assert [(m.seq, m.status.value) for m in messages] == [
            (1, "aborted"), (2, "aborted"), (3, "completed"), (4, "completed")]
        assert messages[3].text() == events_b[-1].data["text"]
        assert chat.committed_seq == 4 and chat.last_provider_state is not None
