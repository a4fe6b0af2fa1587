"""An attacker's reach into the server's log: forged lines through a request's path, and a
traceback per malformed request from any client."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import re
from typing import Any
from urllib.parse import quote

import pytest

from tests.server.support import Api
from turnstate.core._errors import StorageUnavailable
from turnstate.server._logging import one_line, server_logging

_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} [A-Z]+ [\w.]+: ")


async def _raw(api: Api, request: bytes) -> bytes:
    """Send ``request`` as is and read the answer until the server closes."""
    reader, writer = await asyncio.open_connection(api.client.host, api.client.port)
    writer.write(request)
    await writer.drain()
    answer = await reader.read()
    writer.close()
    return answer


async def test_a_path_with_line_breaks_cannot_forge_a_text_log_line(
        api: Api, monkeypatch: pytest.MonkeyPatch) -> None:
    async def down(*args: Any, **kwargs: Any) -> Any:
        raise StorageUnavailable("cannot reach the database")

    monkeypatch.setattr(api.services.store, "load_chat", down)
    forged = "x%0D%0A2026-12-04 10:00:00,000 ERROR turnstate: forged%E2%80%A8line%00"
    stream = io.StringIO()
    with server_logging("warning", "text", stream):
        response = await api.call("GET", f"/api/chats/{forged}")
    assert response.status == 503
    lines = stream.getvalue().splitlines()  # splitlines also breaks at U+2028 and \x1c-\x1e
    assert len(lines) == 1 and _LINE.match(lines[0]), lines
    assert "x\\r\\n2026-12-04 10:00:00,000 ERROR turnstate: forged\\u2028line\\x00" in lines[0]
    assert "chat_id=x\\r\\n2026" in lines[0]


def test_one_line_escapes_control_characters_only() -> None:
    assert one_line("a\nb\rc\td\x00e\x7f\x85\u2028 é ✓") == \
        "a\\nb\\rc\\td\\x00e\\x7f\\x85\\u2028 é ✓"
    assert one_line("plain") == "plain"


MALFORMED = [
    b"GET / HTTP/1.1\r\nHost: x\r\n" + b"".join(b"X-%d: a\r\n" % i for i in range(200)) + b"\r\n",
    b"GET / HTTP/1.1\r\nHost: x\r\nX-Long: " + b"a" * 9000 + b"\r\n\r\n",
    b"POST /api/chats HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
]


@pytest.mark.parametrize("level", ["warning", "debug"])
async def test_a_malformed_request_is_no_error_with_a_traceback(api: Api, level: str) -> None:
    stream = io.StringIO()
    with server_logging(level, "text", stream):
        for request in MALFORMED:
            answer = await _raw(api, request)
            assert answer.split(b"\r\n")[0].endswith(b" 400 Bad Request"), answer[:100]
    text = stream.getvalue()
    assert "Traceback" not in text and "ERROR" not in text, text
    if level == "debug":
        refused = [line for line in text.splitlines() if " refused: " in line]
        assert len(refused) == len(MALFORMED), text
        assert all(line.split()[2] == "DEBUG" for line in refused)
        assert "Too many headers" in refused[0] and "Got more than 8190" in refused[1]
    else:
        assert text == ""


async def test_other_aiohttp_errors_still_log(api: Api) -> None:
    stream = io.StringIO()
    with server_logging("warning", "text", stream):
        try:
            raise RuntimeError("handler exploded")
        except RuntimeError:
            logging.getLogger("aiohttp.server").exception("Error handling request")
    assert "Traceback" in stream.getvalue() and "handler exploded" in stream.getvalue()


def test_one_line_escapes_bidirectional_controls() -> None:
    """A right-to-left override in a logged path would show the rest of the line
    reversed in a terminal (a line that reads as another): escaped like a control."""
    text = "a\u202eb\u2066c\u2069d\u200fe\u061cf\ufeffg"
    assert one_line(text) == "a\\u202eb\\u2066c\\u2069d\\u200fe\\u061cf\\ufeffg"


async def test_the_json_log_escapes_bidirectional_and_other_controls(
        api: Api, monkeypatch: pytest.MonkeyPatch) -> None:
    """A JSON log viewer shows a string's U+202E as it acts (the rest of the line read
    reversed): the JSON format writes it, and every control the text format escapes, as
    a ``\\uNNNN`` escape; a JSON reader decodes the same path."""
    async def down(*args: Any, **kwargs: Any) -> Any:
        raise StorageUnavailable("cannot reach the database")

    monkeypatch.setattr(api.services.store, "load_chat", down)
    path = "x\u202egpj.exe\u2066y\u2069z\u200f\x7f\x85\u2028\ufeff"
    stream = io.StringIO()
    with server_logging("warning", "json", stream):
        response = await api.call("GET", f"/api/chats/{quote(path)}")
    assert response.status == 503
    text = stream.getvalue()
    lines = text.split("\n")[:-1]
    assert len(lines) == 1, text
    assert not _SHOWN_CONTROLS.search(lines[0]), ascii(lines[0])
    entry = json.loads(lines[0])
    assert entry["chat_id"] == path and path in entry["message"]
    assert "x\\u202egpj.exe\\u2066y\\u2069z\\u200f\\u007f\\u0085\\u2028\\ufeff" in lines[0]


_SHOWN_CONTROLS = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029"
                             "\u202a-\u202e\u2066-\u2069\ufeff]")
