"""An emulator's request log is bounded (wire9): before, ``EmulatorBase.requests`` was a
list that kept every request (body and decoded JSON) for the emulator's life, so an
in-process emulator that served large turns grew by tens of MiB a turn. Now it holds the
most recent requests, by count and by body bytes, the newest always, and still reads
as the list tests use."""

from __future__ import annotations

import aiohttp

from turnstate.emulators import ChatCompletionsEmulator, EmulatorServer, RecordedRequest
from turnstate.emulators._request_log import RequestLog


def recorded(size: int, tag: str = "") -> RecordedRequest:
    return RecordedRequest(method="POST", path="/" + tag, headers={}, body=b"x" * size,
                           json=None)


def test_the_log_keeps_the_most_recent_by_count_and_bytes() -> None:
    log = RequestLog(capacity=3, max_bytes=100)
    for tag in "abcde":
        log.append(recorded(10, tag))
    assert [r.path for r in log] == ["/c", "/d", "/e"]
    assert (len(log), log.total, log.dropped, log.held_bytes) == (3, 5, 2, 30)
    assert log[0].path == "/c" and log[-1].path == "/e" and [r.path for r in log[-2:]] == [
        "/d", "/e"]
    log.append(recorded(95, "big"))  # over the bytes: only the newest is held
    assert [r.path for r in log] == ["/big"] and log.held_bytes == 95
    log.append(recorded(500, "huge"))  # the newest is kept whatever its size
    assert [r.path for r in log] == ["/huge"]
    log.clear()
    assert log == [] and not log and log.total == 0


async def test_an_emulator_holds_its_recent_requests_only() -> None:
    emulator = ChatCompletionsEmulator()
    assert emulator.requests == []
    emulator.requests.capacity = 2
    body = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}
    async with EmulatorServer(emulator) as server, aiohttp.ClientSession() as session:
        for _ in range(5):
            async with session.post(server.base_url + "/v1/chat/completions", json=body,
                                    headers={"Authorization": "Bearer k"}) as response:
                assert response.status == 200
    assert (len(emulator.requests), emulator.requests.total) == (2, 5)
    assert emulator.requests[-1].json == body
    assert emulator.requests[-1].headers["authorization"] == "<redacted>"
