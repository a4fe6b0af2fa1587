"""A chat view never writes out the inline bytes it does not show: a chat of large
images cost the event loop half a second and 64 MiB per 20 MiB image per view."""

from __future__ import annotations

import tracemalloc
from datetime import UTC, datetime

from turnstate.core import FilePart, ImagePart, TextPart
from turnstate.core._conversation import Message, MessageStatus, Role
from turnstate.core._media_tokens import media_tokens
from turnstate.server._views import message_view

NOW = datetime(2026, 12, 4, tzinfo=UTC)
PNG_HEADER = (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"
              + (1200).to_bytes(4, "big") + (900).to_bytes(4, "big") + b"\x08\x02\x00\x00\x00")
MIB = 1024 * 1024


def test_a_media_part_is_shown_without_its_bytes_being_written_out() -> None:
    image = ImagePart(media_type="image/png", data=PNG_HEADER + bytes(8 * MIB),
                      filename="big.png")
    pdf = FilePart(media_type="application/pdf", data=b"%PDF-1.4\n" + bytes(MIB),
                   filename="a.pdf")
    message = Message(id="m", chat_id="c/1", seq=3, role=Role.USER,
                      status=MessageStatus.COMPLETED, created_at=NOW, updated_at=NOW,
                      parts=(TextPart(text="look"), image, pdf))
    tracemalloc.start()
    try:
        view = message_view(message, None)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < MIB // 4, peak  # the bytes written out as base64 were 12 MiB and more
    assert view["parts"] == [
        {"type": "text", "text": "look"},
        {"type": "image", "mediaType": "image/png", "filename": "big.png",
         "tokens": media_tokens(image), "bytes": len(image.data or b""),
         "src": "/api/chats/c%2F1/messages/3/parts/1"},
        {"type": "file", "mediaType": "application/pdf", "filename": "a.pdf",
         "tokens": media_tokens(pdf), "bytes": len(pdf.data or b""),
         "src": "/api/chats/c%2F1/messages/3/parts/2"}]
    assert media_tokens(image) != media_tokens(ImagePart(media_type="image/png",
                                                         url="https://x.example/a.png"))
