"""Images and PDFs through the HTTP API (issue 23 item 2): ``content`` parts beside
``text`` in a turn's body, stored with the message, shown in the chat view without their
bytes and served by their ``src``; bad parts are a 400 (or 413) naming the part, before
any provider request; the Vercel AI SDK's ``file`` parts go the same way."""

from __future__ import annotations

import base64
import json
import struct
import zlib
from typing import Any

import attrs
import pytest

from tests.server.support import Api, parse_sse
from turnstate.server import ServerConfig
from turnstate.server._config import MIB

PATH = "/api/chats/{}/turns"


def png(width: int = 3, height: int = 2) -> bytes:
    """A real PNG (grey pixels), so the browser can decode what the server serves."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(
            ">I", zlib.crc32(kind + data))
    rows = b"".join(b"\x00" + b"\x80" * width for _ in range(height))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 0,
                                                              0, 0, 0))
            + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


def image(raw: bytes, **changes: Any) -> dict[str, Any]:
    return {"type": "image", "mediaType": "image/png",
            "data": base64.b64encode(raw).decode(), **changes}


def body(text: str = "what is this?", **changes: Any) -> dict[str, Any]:
    return {"provider": "openai", "model": "gpt-4o", "text": text, **changes}


async def test_an_image_is_sent_stored_shown_and_served(api: Api) -> None:
    chat = await api.new_chat()
    picture = png()
    response = await api.call("POST", PATH.format(chat), json=body(content=[image(picture)]))
    assert response.status == 200, await response.text()
    events, _ = parse_sse(await response.text())
    assert events[-1].event == "turn_completed"
    answer = "".join(e.data["text"] for e in events if e.event == "text_delta")
    assert f"an image/png of {len(picture):,} bytes" in answer
    view = await api.json("GET", f"/api/chats/{chat}")
    question = view["messages"][0]
    assert [p["type"] for p in question["parts"]] == ["text", "image"]
    shown = question["parts"][1]
    assert "data" not in shown and shown["bytes"] == len(picture)
    assert shown["src"] == f"/api/chats/{chat}/messages/1/parts/1"
    served = await api.call("GET", shown["src"])
    assert served.status == 200 and await served.read() == picture
    assert served.headers["Content-Type"] == "image/png"
    assert served.headers["X-Content-Type-Options"] == "nosniff"
    assert served.headers["Content-Security-Policy"] == "default-src 'none'; sandbox"
    for wrong, owner in ((f"/api/chats/{chat}/messages/1/parts/0", "alice"),
                         (f"/api/chats/{chat}/messages/1/parts/9", "alice"),
                         (f"/api/chats/{chat}/messages/7/parts/1", "alice"),
                         (shown["src"], "bob")):
        assert (await api.call("GET", wrong, owner)).status == 404, (wrong, owner)
    # An edit of the question's text keeps its image.
    edited = await api.json("PATCH", f"/api/chats/{chat}/messages/1", json={"text": "and now?"})
    assert [p["type"] for p in edited["messages"][0]["parts"]] == ["text", "image"]


async def test_a_pdf_and_an_image_url_are_taken_without_text(api: Api) -> None:
    chat = await api.new_chat()
    pdf = b"%PDF-1.4\n% a tiny document\n"
    parts = [{"type": "file", "mediaType": "application/pdf", "filename": "r\u00e9sum\u00e9.pdf",
              "data": base64.b64encode(pdf).decode()},
             {"type": "image", "url": "https://example.com/cat.jpg"}]
    events = await api.turn(chat, text="", content=parts)
    assert events[-1].event == "turn_completed", events[-1]
    shown = (await api.json("GET", f"/api/chats/{chat}"))["messages"][0]["parts"]
    assert [p["type"] for p in shown] == ["file", "image"]
    assert shown[1]["url"] == "https://example.com/cat.jpg" and "src" not in shown[1]
    served = await api.call("GET", shown[0]["src"])
    assert await served.read() == pdf
    assert served.headers["Content-Disposition"] == \
        "attachment; filename*=UTF-8''r%C3%A9sum%C3%A9.pdf"


BAD_PARTS = [
    ({"content": "a picture"}, "content"),
    ({"content": [{"type": "video"}]}, "content[0]"),
    ({"content": ["just text"]}, "content[0]"),
    ({"content": [image(b"x", data="!!not base64!!")]}, "content[0].data"),
    ({"content": [image(b"x", data=42)]}, "content[0].data"),
    ({"content": [image(b"x", mediaType=None)]}, "content[0].mediaType"),
    ({"content": [image(b"x", mediaType="image/svg+xml")]}, "content[0].mediaType"),
    ({"content": [{"type": "image", "url": "http://example.com/a.png"}]}, "content[0].url"),
    ({"content": [image(b"x", url="https://example.com/a.png")]}, "content[0].data"),
    ({"content": [image(b"x", colour="red")]}, "content[0].colour"),
    ({"content": [{"type": "text", "text": 5}]}, "content[0].text"),
    ({"content": [image(b"x", filename="a\nb.png")]}, "content[0].filename"),
    ({"content": [{"type": "file", "data": "eA==", "filename": 5}]}, "content[1].filename"),
    ({"text": "", "content": []}, "text"),
    ({"content": [image(b"x")] * 40}, "content"),
    ({"provider": "deepseek", "model": "deepseek-v4-flash", "content": [image(png())]},
     "content[0]"),
]


@pytest.mark.parametrize(("changes", "field"), BAD_PARTS)
async def test_a_bad_part_is_a_400_naming_it_before_any_request(
        api: Api, changes: dict[str, Any], field: str) -> None:
    chat = await api.new_chat()
    if field == "content[1].filename":  # a good part first: the index names the bad one
        changes = {"content": [image(png()), *changes["content"]]}
    refused = await api.json("POST", PATH.format(chat), json=body(**changes), status=400)
    assert (refused["error"], refused["field"]) == ("invalid_field", field), refused
    assert not any(e.requests for e in api.stack.emulators.values())
    assert (await api.json("GET", f"/api/chats/{chat}"))["messages"] == []


async def test_inline_bytes_over_the_engines_bound_are_a_413(api: Api) -> None:
    engine = api.services.engine
    engine.limits = attrs.evolve(engine.limits, max_inline_bytes=100)
    chat = await api.new_chat()
    parts = [image(png()), image(b"\x89PNG" + b"\x00" * 90)]
    refused = await api.json("POST", PATH.format(chat), json=body(content=parts), status=413)
    assert (refused["error"], refused["field"]) == ("content_too_large", "content")
    assert not api.stack.emulators["openai"].requests


async def test_ui_messages_take_file_parts_and_give_them_back(api: Api) -> None:
    chat = await api.new_chat()
    picture = png()
    url = f"data:image/png;base64,{base64.b64encode(picture).decode()}"
    message = {"id": "m1", "role": "user", "parts": [
        {"type": "text", "text": "look"},
        {"type": "file", "mediaType": "image/png", "url": url, "filename": "grey.png"}]}
    response = await api.call("POST", "/api/ui-messages", json={
        "id": chat, "messages": [message], "provider": "openai", "model": "gpt-4o"})
    assert response.status == 200, await response.text()
    chunks = [json.loads(line[len("data: "):]) for line in (await response.text()).split("\n")
              if line.startswith("data: {")]
    said = "".join(c["delta"] for c in chunks if c["type"] == "text-delta")
    assert f"an image/png of {len(picture):,} bytes" in said
    history = await api.json("GET", f"/api/ui-messages/{chat}")
    src = f"/api/chats/{chat}/messages/1/parts/1"  # the route serving the bytes
    assert history[0]["parts"] == [{"type": "text", "text": "look"},
                                   {"type": "file", "mediaType": "image/png", "url": src,
                                    "filename": "grey.png"}]
    assert await (await api.call("GET", src)).read() == picture
    bad = {**message, "parts": [{"type": "file", "mediaType": "image/png",
                                 "url": "data:image/gif;base64,AAAA"}]}
    refused = await api.json("POST", "/api/ui-messages", status=400, json={
        "id": chat, "messages": [bad], "provider": "openai", "model": "gpt-4o"})
    assert refused["field"] == "messages[0].parts[0].url"


@pytest.mark.parametrize("config", [ServerConfig()])
async def test_the_default_limits_take_20_mib_of_image_and_refuse_one_byte_more(
        api: Api) -> None:
    chat = await api.new_chat()
    head = png()
    picture = head + b"\x00" * (20 * MIB - len(head))
    events = await api.turn(chat, content=[image(picture)])
    assert events[-1].event == "turn_completed", events[-1]
    said = "".join(e.data["text"] for e in events if e.event == "text_delta")
    assert "an image/png of 20,971,520 bytes" in said
    refused = await api.json("POST", PATH.format(chat), status=413,
                             json=body(content=[image(picture + b"\x00")]))
    assert refused["error"] == "content_too_large"
