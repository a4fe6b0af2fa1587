"""What a turn with a large image holds in memory (memory7).

A 20 MiB image (26.7 MiB of JSON) was held as the raw body beside its text and the
parsed body (4x the image), its base64 copied to ASCII bytes to decode it, and the
provider request written as the payload's base64, the JSON encoder's quoted copy, the
body's text and its bytes (5x at the peak). Now each copy is dropped once consumed and
the request's base64 is spliced into its bytes once (``core._media.deferred_media``):
3.7x at the peak, the decoded bytes and the request body (2.3x) while the provider
answers. Measured with tracemalloc up to the moment the emulator takes the request, so
the emulator's own copies are not counted."""

from __future__ import annotations

import base64
import json
import tracemalloc
from typing import Any

import pytest

from tests.server.support import Api, turn_body
from turnstate.core._json import compact_json
from turnstate.core._media import base64_text, data_url, deferred_media
from turnstate.server import ServerConfig

SIZE = 4 * 1024 * 1024
PNG = b"\x89PNG\r\n\x1a\n" + bytes(SIZE - 8)


def _body(route: str, chat_id: str, provider: str) -> tuple[str, bytes]:
    model = "gemini-2.5-flash" if provider == "gemini" else "gpt-4o"
    data = base64.b64encode(PNG).decode()
    if route == "turns":
        return f"/api/chats/{chat_id}/turns", json.dumps(turn_body(
            "look", provider=provider, model=model,
            content=[{"type": "image", "mediaType": "image/png", "data": data}])).encode()
    return "/api/ui-messages", json.dumps({
        "id": chat_id, "provider": provider, "model": model, "messages": [
            {"role": "user", "parts": [{"type": "text", "text": "look"}, {
                "type": "file", "mediaType": "image/png",
                "url": "data:image/png;base64," + data}]}]}).encode()


@pytest.mark.parametrize("config", [ServerConfig(max_text_chars=2_000)])
@pytest.mark.parametrize(("route", "provider"), [
    ("turns", "openai"), ("turns", "gemini"), ("turns", "openai-compatible"),
    ("ui", "openai")])
async def test_a_turn_holds_its_image_a_few_times_at_most(
        api: Api, route: str, provider: str, monkeypatch: pytest.MonkeyPatch) -> None:
    path, raw = _body(route, await api.new_chat(), provider)
    emulator = api.stack.emulators[provider]
    record, seen = emulator.record, []

    async def recording(request: Any) -> Any:
        seen.append(tracemalloc.get_traced_memory())  # (held now, peak so far)
        return await record(request)

    monkeypatch.setattr(emulator, "record", recording)
    tracemalloc.start()
    try:
        response = await api.call("POST", path, data=raw,
                                  headers={"Content-Type": "application/json"})
        text = await response.text()
    finally:
        tracemalloc.stop()
    assert response.status == 200, text
    assert ("turn_completed" if route == "turns" else "[DONE]") in text
    held, peak = seen[0]
    assert peak < 4.2 * SIZE, f"peak {peak / SIZE:.2f}x the image"  # was 5.0x
    assert held < 2.9 * SIZE, f"held {held / SIZE:.2f}x the image"  # bytes + request body
    sent = emulator.requests[-1].body
    assert base64.b64encode(PNG) in sent and b"tsmedia" not in sent


def test_spliced_media_are_the_payload_written_whole() -> None:
    images = [b"\x89PNG" + bytes([n]) * (n * 7 + 1) for n in range(3)]

    def payload() -> Any:
        return {"input": [{"image_url": data_url("image/png", images[0])},
                          {"data": base64_text(images[1])}, "tsmedia\u00e9",
                          {"data": base64_text(images[2]), "again": base64_text(images[0])}]}

    with deferred_media() as media:
        text = compact_json(payload())
    assert "tsmedia" in text and base64_text(images[1]) not in text
    assert media.spliced(text.encode()) == compact_json(payload()).encode()
    with deferred_media() as empty:
        assert empty.spliced(b'{"a":"tsmedia"}') == b'{"a":"tsmedia"}'
