"""An image or file URL whose port is no port is refused before the lease (embed6): it
was taken and stored, and the provider's fetch of it failed the turn with its 400."""

from __future__ import annotations

import pytest

from turnstate import FilePart, ImagePart, InvalidInput, TextPart, TurnInput


@pytest.mark.parametrize("url", ["https://example.com:99999/a.png", "https://example.com:x/a.png",
                                 "https://example.com:-1/a.png"])
def test_a_url_with_a_bad_port_is_invalid_input_naming_it(url: str) -> None:
    for part in (ImagePart(url=url), FilePart(url=url)):
        with pytest.raises(InvalidInput) as refused:
            TurnInput(provider="openai", model="gpt-4o", system_prompt="",
                      content=(TextPart(text="see"), part))
        assert refused.value.field == "content[1].url"


def test_a_url_with_a_port_is_taken() -> None:
    turn = TurnInput(provider="openai", model="gpt-4o", system_prompt="",
                     content=(TextPart(text="see"), ImagePart(url="https://example.com:8443/a.png")))
    assert isinstance(turn.content[1], ImagePart)
