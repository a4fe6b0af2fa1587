"""A refused media part says what is wrong in plain words and what to send instead
(rough9): "an image/png", the first bytes as hex (and as text when they are text), a text
or image file sent as the wrong part named as the part it should be, and an image without
a media type told the type its bytes are."""

from __future__ import annotations

import pytest

from turnstate.core._conversation import TextPart
from turnstate.core._errors import InvalidInput
from turnstate.core._media import FilePart, ImagePart, part_problem
from turnstate.engine import TurnInput

PNG = b"\x89PNG\r\n\x1a\n" + bytes(16)
JPEG = b"\xff\xd8\xff\xe0" + bytes(16)


@pytest.mark.parametrize(("part", "field", "expected", "absent"), [
    (ImagePart(media_type="image/png", data=b"not a png at all"), "data",
     ("is not an image/png", "6e 6f 74 20 61 20 70 6e", '"not a pn"', "TextPart"),
     ("b'", "a image")),
    (ImagePart(media_type="image/gif", data=b"\x00\x01\x02\xfe\xff\x10\x11\x12\x13"), "data",
     ("is not an image/gif", "00 01 02 fe ff 10 11 12"), ("b'", "\\x", "TextPart")),
    (FilePart(data=b"hello, not a PDF"), "data",
     ("is not an application/pdf", "68 65 6c 6c 6f 2c 20 6e"), ("b'", "a application")),
    (ImagePart(media_type="image/png", data=b"https://example.com/cat.png"), "data",
     ("a URL, give it as the part's url",), ("TextPart",)),
    (FilePart(media_type="text/plain", data=b"some notes"), "media_type",
     ("'text/plain'", "TextPart"), ()),
    (FilePart(media_type="image/png", data=PNG), "media_type", ("ImagePart",), ()),
    (ImagePart(media_type="application/pdf", data=b"%PDF-1.7\n"), "media_type",
     ("FilePart",), ()),
    (ImagePart(data=JPEG), "media_type", ("image/jpeg", "media_type='image/jpeg'"), ()),
    (ImagePart(data=PNG), "media_type", ("media_type='image/png'",), ()),
])
def test_a_refused_media_part_says_what_to_send(part: ImagePart | FilePart, field: str,
                                                expected: tuple[str, ...],
                                                absent: tuple[str, ...]) -> None:
    problem = part_problem(part)
    assert problem is not None and problem[0] == field, problem
    for words in expected:
        assert words in problem[1], problem[1]
    for words in absent:
        assert words not in problem[1], problem[1]


def test_turn_input_gives_the_same_words() -> None:
    with pytest.raises(InvalidInput) as caught:
        TurnInput(provider="openai", model="gpt-4o", system_prompt="",
                  content=(TextPart(text="read"), FilePart(media_type="text/plain",
                                                           data=b"notes")))
    assert caught.value.field == "content[1].media_type"
    assert "TextPart" in caught.value.problem
