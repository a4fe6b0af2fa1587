"""A request body the client says is compressed (``Content-Encoding: gzip`` or
``deflate``, which aiohttp decodes as it reads) but is not: a 400 naming the fault, not a
500 with a traceback; and a refused request whose body nobody read writes no traceback
into the log (aiohttp reads such a body after the answer, to keep the connection)."""

from __future__ import annotations

import gzip
import io
import json

import pytest

from tests.server.support import Api
from tests.server.test_attack_logs import _raw
from turnstate.server._logging import server_logging


def _request(method: str, path: str, body: bytes, encoding: str, token: str | None,
             *, chunked: bool = False) -> bytes:
    head = [f"{method} {path} HTTP/1.1", "Host: x", f"Content-Encoding: {encoding}",
            "Content-Type: application/json", "Connection: close"]
    if token:
        head.append(f"Authorization: Bearer {token}")
    if chunked:
        head.append("Transfer-Encoding: chunked")
        payload = b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)
    else:
        head.append(f"Content-Length: {len(body)}")
        payload = body
    return ("\r\n".join(head) + "\r\n\r\n").encode() + payload


@pytest.mark.parametrize("encoding", ["gzip", "deflate"])
@pytest.mark.parametrize("chunked", [False, True])
async def test_a_body_that_is_not_what_its_encoding_says_is_a_400(
        api: Api, encoding: str, chunked: bool) -> None:
    chat_id = await api.new_chat()
    stream = io.StringIO()
    with server_logging("warning", "text", stream):
        answer = await _raw(api, _request("PATCH", f"/api/chats/{chat_id}", b"not gzip at all",
                                          encoding, "alice-token", chunked=chunked))
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.split(b"\r\n")[0] == b"HTTP/1.1 400 Bad Request", answer[:300]
    assert json.loads(body)["error"] == "invalid_body", body
    assert stream.getvalue() == "", stream.getvalue()


async def test_a_gzip_body_is_still_read(api: Api) -> None:
    chat_id = await api.new_chat()
    body = gzip.compress(json.dumps({"title": "zipped"}).encode())
    answer = await _raw(api, _request("PATCH", f"/api/chats/{chat_id}", body, "gzip",
                                      "alice-token"))
    assert answer.split(b"\r\n")[0] == b"HTTP/1.1 200 OK", answer[:300]
    assert json.loads(answer.partition(b"\r\n\r\n")[2])["title"] == "zipped"


@pytest.mark.parametrize("level", ["warning", "debug"])
async def test_an_unread_bad_body_writes_no_traceback(api: Api, level: str) -> None:
    """No token (401) and a route that reads no body (201): aiohttp reads the body
    after the answer, fails to decode it and logged ERROR with three tracebacks."""
    stream = io.StringIO()
    with server_logging(level, "text", stream):
        for token, status in ((None, b"401"), ("alice-token", b"201")):
            answer = await _raw(api, _request("POST", "/api/chats", b"junk!", "gzip", token))
            assert answer.split(b"\r\n")[0].split()[1] == status, answer[:300]
    text = stream.getvalue()
    assert "Traceback" not in text and "ERROR" not in text, text
    if level == "debug":
        refused = [line for line in text.splitlines() if " refused: " in line]
        assert len(refused) == 2 and all(" DEBUG " in line for line in refused), text
        assert all("Can not decode content-encoding: gzip" in line for line in refused), text
    else:
        assert text == ""
