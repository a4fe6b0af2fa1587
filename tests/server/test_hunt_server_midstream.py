"""A stream that fails after its headers went out is cut, not answered a second time.

A resumed stream follows another node's turn through the store's log; when a read of
it failed (the database out for a moment) the error middleware answered the
``StorageUnavailable`` as usual, a ``503`` JSON response, and aiohttp wrote that whole
response, status line and headers, into the middle of the chunked SSE body: the client
read ``HTTP/1.1 503`` as a chunk size. The stream is now cut instead: its connection
closes mid-body, which a client reads as a dropped stream and resumes from the last id
it saw, and the cause is logged as before.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.server.support import Api, turn_body
from turnstate.core._errors import StorageUnavailable
from turnstate.emulators._base import Fault
from turnstate.engine._follow import Following
from turnstate.storage._turn_log import LoggedEvent


def _failing_after_two_events(api: Api, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every resume gets two events, then its read of the log fails."""
    engine = api.services.engine
    follow = engine.follow

    async def failing(*args: Any, **kwargs: Any) -> Following:
        following = await follow(*args, **kwargs)

        async def batches() -> AsyncIterator[tuple[LoggedEvent, ...]]:
            async for batch in following.batches:
                yield batch[:2]
                raise StorageUnavailable("the database went away")
        return Following(notice=following.notice, batches=batches())

    monkeypatch.setattr(engine, "follow", failing)


async def _raw_get(api: Api, path: str) -> bytes:
    """The whole answer as bytes, to the connection's end (the client's parser would
    stop at the first broken chunk)."""
    server = api.client.server
    reader, writer = await asyncio.open_connection(server.host, server.port)
    writer.write(f"GET {path} HTTP/1.1\r\nHost: localhost\r\n"
                 "Authorization: Bearer alice-token\r\n\r\n".encode())
    async with asyncio.timeout(30):
        answer = await reader.read()
    writer.close()
    return answer


async def test_a_resume_whose_log_read_fails_is_cut_not_answered_twice(
        api: Api, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    chat = await api.new_chat()
    response = await api.call("POST", f"/api/chats/{chat}/turns", json=turn_body())
    turn = response.headers["X-Turn-Id"]
    await response.read()
    _failing_after_two_events(api, monkeypatch)
    with caplog.at_level(logging.ERROR, logger="turnstate"):
        answer = await _raw_get(api, f"/api/chats/{chat}/turns/{turn}/events")
    assert answer.startswith(b"HTTP/1.1 200 OK\r\n")
    assert answer.count(b"HTTP/1.1") == 1, answer
    assert b"id: 2\n" in answer and b"id: 3\n" not in answer
    assert not answer.endswith(b"0\r\n\r\n")  # no end of the chunked body: a dropped stream
    assert any("the database went away" in r.getMessage() for r in caplog.records)


async def test_a_ui_stream_resume_whose_log_read_fails_is_cut(
        api: Api, monkeypatch: pytest.MonkeyPatch) -> None:
    chat = await api.new_chat()
    gate = asyncio.Event()
    api.stack.emulators["openai"].faults.push(Fault(gate=gate))
    started = await api.call("POST", f"/api/chats/{chat}/turns", json=turn_body())
    await started.content.readuntil(b"\n\n")  # the turn runs, held at its provider
    _failing_after_two_events(api, monkeypatch)
    answer = await _raw_get(api, f"/api/ui-messages/{chat}/stream")
    gate.set()
    await started.read()
    assert answer.startswith(b"HTTP/1.1 200 OK\r\n")
    assert answer.count(b"HTTP/1.1") == 1, answer
    assert not answer.endswith(b"0\r\n\r\n")
