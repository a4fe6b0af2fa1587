"""Inline image and PDF bytes must be what their media type says (hunt-api).

``ImagePart(media_type="image/png", data=b"https://...")`` (a URL where bytes belong),
bytes of no image format at all, or a PNG declared ``image/jpeg`` were taken, stored
with the user message and sent: a provider refuses such a request with an HTTP 400
(Anthropic: "Could not process image", or the image "does not match the provided media
type"), and since the part is replayed with the history, every later replay of the chat
failed too. The first bytes are now checked where the part enters (``part_problem``).
"""

from __future__ import annotations

import pytest

from turnstate import FilePart, ImagePart, InvalidInput, TextPart, TurnInput

PNG = b"\x89PNG\r\n\x1a\n" + bytes(16)
JPEG = b"\xff\xd8\xff\xe0" + bytes(16)
GIF = b"GIF89a" + bytes(16)
WEBP = b"RIFF\x10\x00\x00\x00WEBPVP8 " + bytes(8)
PDF = b"%PDF-1.7\n" + bytes(16)


def _turn(part: ImagePart | FilePart) -> TurnInput:
    return TurnInput(provider="openai", model="gpt-4o", system_prompt="",
                     content=(TextPart(text="what is this?"), part))


@pytest.mark.parametrize(("part", "field", "words"), [
    (ImagePart(media_type="image/png", data=b"https://example.com/cat.png"), "data",
     "is not an image/png"),
    (ImagePart(media_type="image/png", data=b"iVBORw0KGgo="), "data", "none of PNG"),
    (ImagePart(media_type="image/webp", data=b"RIFF\x10\x00\x00\x00WAVEfmt "), "data",
     "none of PNG"),
    (ImagePart(media_type="image/jpeg", data=PNG), "media_type",
     "is 'image/jpeg' but the bytes are an image/png"),
    (ImagePart(media_type="image/gif", data=WEBP), "media_type", "are an image/webp"),
    (FilePart(data=b"hello, not a PDF"), "data", "is not an application/pdf"),
    (FilePart(data=bytes(1024) + PDF), "data", "is not an application/pdf"),
    (FilePart(data=PNG), "media_type", "are an image/png"),
])
def test_bytes_that_are_not_their_media_type_are_refused(part: ImagePart | FilePart,
                                                         field: str, words: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        _turn(part)
    assert caught.value.field == f"content[1].{field}" and words in caught.value.problem


@pytest.mark.parametrize(("data", "media_type"), [
    (PNG, "image/png"), (JPEG, "image/jpeg"), (GIF, "image/gif"),
    (b"GIF87a" + bytes(8), "image/gif"), (WEBP, "image/webp"), (PDF, "application/pdf"),
    (b"\xef\xbb\xbf" + PDF, "application/pdf"),  # readers take a header within 1,024 bytes
    (b"Content-Type: application/pdf\r\n\r\n" + PDF, "application/pdf"),
])
def test_bytes_of_their_media_type_are_taken(data: bytes, media_type: str) -> None:
    part = FilePart(data=data) if media_type == "application/pdf" else ImagePart(
        media_type=media_type, data=data)
    assert _turn(part).content[1] == part
