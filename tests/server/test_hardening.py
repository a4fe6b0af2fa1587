"""What an attacker and an operator found: timeouts, headers, CORS on streams, deep JSON,
storage outages, the log."""

from __future__ import annotations

import asyncio
import io
import json
import logging
from typing import Any

import pytest

from tests.server.support import Api, parse_sse, turn_body
from turnstate.core._errors import StorageUnavailable
from turnstate.server import ServerConfig
from turnstate.server._logging import server_logging
from turnstate.server._sockets import AcceptFailures

GUARDED = ServerConfig(max_body_bytes=64 * 1024, max_text_chars=2_000,
                       cors_origin="https://chat.example", read_timeout_seconds=0.3,
                       allowed_hosts=frozenset({"localhost", "127.0.0.1"}))


async def test_deeply_nested_json_is_a_400_not_a_500(api: Api) -> None:
    chat = await api.new_chat()
    deep = "[" * 20_000 + "]" * 20_000
    for path in (f"/api/chats/{chat}/turns", "/api/emulator/faults"):
        response = await api.call("POST", path, data=deep,
                                  headers={"Content-Type": "application/json"})
        assert response.status == 400, await response.text()
        assert (await response.json())["error"] == "invalid_json"


async def test_a_storage_outage_answers_503_with_retry_after(
        api: Api, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    async def down(*args: Any, **kwargs: Any) -> Any:
        raise StorageUnavailable("cannot reach the database")

    monkeypatch.setattr(api.services.store, "list_chats", down)
    with caplog.at_level(logging.ERROR, logger="turnstate"):
        response = await api.call("GET", "/api/chats")
    assert response.status == 503
    assert response.headers["Retry-After"] == "2"
    assert (await response.json())["error"] == "storage_unavailable"
    assert any("storage unavailable" in r.getMessage() for r in caplog.records)


async def test_a_500_always_logs_its_cause_with_the_chat_id(
        api: Api, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    chat = await api.new_chat()

    async def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("the disk is full of bees")

    monkeypatch.setattr(api.services.store, "load_chat", broken)
    with caplog.at_level(logging.ERROR, logger="turnstate"):
        response = await api.call("GET", f"/api/chats/{chat}")
    assert response.status == 500
    assert (await response.json()) == {"status": 500, "error": "internal_error",
                                       "message": "the server could not do that"}
    (record,) = [r for r in caplog.records if r.exc_info]
    assert "bees" in str(record.exc_info[1]) and record.chat_id == chat  # type: ignore[attr-defined]


async def test_api_answers_are_not_cached_or_sniffed_and_name_no_versions(api: Api) -> None:
    for response in (await api.call("GET", "/api/chats"), await api.call("GET", "/nope"),
                     await api.client.get("/"), await api.client.get("/healthz")):
        assert response.headers["Server"] == "turnstate"
        assert response.headers["X-Content-Type-Options"] == "nosniff"
    api_answer = await api.call("GET", "/api/chats")
    assert api_answer.headers["Cache-Control"] == "no-store"


@pytest.mark.parametrize("config", [GUARDED])
async def test_the_turn_stream_carries_the_cors_headers(api: Api) -> None:
    chat = await api.new_chat()
    origin = {"Origin": "https://chat.example"}
    response = await api.call("POST", f"/api/chats/{chat}/turns", json=turn_body(),
                              headers=origin)
    assert response.status == 200
    assert response.headers["Access-Control-Allow-Origin"] == "https://chat.example"
    events, _ = parse_sse(await response.text())
    assert events[-1].event == "turn_completed"
    other = await api.call("POST", f"/api/chats/{chat}/turns", json=turn_body(),
                           headers={"Origin": "https://evil.example"})
    assert "Access-Control-Allow-Origin" not in other.headers
    await other.read()


@pytest.mark.parametrize("config", [GUARDED])
async def test_allowed_hosts_guard_healthz_and_metrics(api: Api) -> None:
    for path in ("/healthz", "/metrics"):
        assert (await api.client.get(path, headers={"Host": "localhost:8080"})).status == 200
        rebound = await api.client.get(path, headers={"Host": "attacker.example"})
        assert rebound.status == 421
        assert (await rebound.json())["error"] == "host_not_allowed"
    assert (await api.call("GET", "/api/chats", headers={"Host": "x.example"})).status == 200


async def _connect(api: Api) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    server = api.client.server
    return await asyncio.open_connection(server.host, server.port)


@pytest.mark.parametrize("config", [GUARDED])
async def test_half_sent_headers_are_closed_after_the_read_timeout(api: Api) -> None:
    reader, writer = await _connect(api)
    writer.write(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Slow: ")
    async with asyncio.timeout(5):  # 0.3 s configured; without a timeout it never closes
        assert await reader.read() == b""
    writer.close()


@pytest.mark.parametrize("config", [GUARDED])
async def test_a_body_that_never_arrives_times_out_and_a_huge_one_is_refused_at_once(
        api: Api) -> None:
    head = ("POST /api/chats/c/turns HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer "
            "alice-token\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{{}}")
    for length, status in ((99_999_999_999, b"413"), (100, b"408")):
        reader, writer = await _connect(api)
        writer.write(head.format(length).encode())
        async with asyncio.timeout(5):
            answer = await reader.read()
        assert answer.split(b" ")[1] == status, answer[:200]
        writer.close()


def test_accept_failures_are_logged_once_per_interval(
        caplog: pytest.LogCaptureFixture) -> None:
    now = [0.0]
    failures = AcceptFailures(interval=10.0, clock=lambda: now[0])
    context = {"message": "socket.accept() out of system resource",
               "exception": OSError(24, "Too many open files")}
    with caplog.at_level(logging.ERROR, logger="turnstate"):
        for _ in range(21_366):
            assert failures.handle(context)
        now[0] = 10.5
        failures.handle(context)
    messages = [r.getMessage() for r in caplog.records]
    assert messages == ["cannot accept connections: Too many open files; retrying",
                        "cannot accept connections: Too many open files (21365 more since "
                        "the last report); retrying"]
    assert not failures.handle({"message": "something else"})


def test_json_log_lines_carry_the_ids_and_are_scrubbed() -> None:
    stream = io.StringIO()
    log = logging.getLogger("turnstate")
    with server_logging("info", "json", stream):
        log.info("turn t1 completed", extra={"turn_id": "t1", "chat_id": "c1"})
        try:
            raise ValueError("key sk-proj-abcdefghijklmnopqrstuvwxyz123456 leaked")
        except ValueError:
            log.exception("request failed", extra={"chat_id": "c2"})
        log.debug("not shown at info")
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert [(e["level"], e["message"], e.get("turn_id"), e["chat_id"]) for e in lines] == \
        [("INFO", "turn t1 completed", "t1", "c1"), ("ERROR", "request failed", None, "c2")]
    assert "ValueError" in lines[1]["error"] and "abcdefghijklmnop" not in lines[1]["error"]
    log.warning("after the server: not written")
    assert len(stream.getvalue().splitlines()) == 2
