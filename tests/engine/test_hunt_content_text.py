"""A text part of a turn's ``content`` that is not text UTF-8 can encode is
``InvalidInput`` naming the part.

``TurnInput(content=[TextPart(text=5)])`` raised a bare ``TypeError`` (joining the
parts' text), and a lone surrogate in a text part was reported as ``user_text``, a
field the caller never gave.
"""

from __future__ import annotations

from typing import Any

import pytest

from turnstate import ImagePart, InvalidInput, TextPart, TurnInput

PNG = b"\x89PNG\r\n\x1a\n" + bytes(16)


@pytest.mark.parametrize(("parts", "field"), [
    ([TextPart(text=5)], "content[0].text"),  # type: ignore[arg-type]
    ([ImagePart(media_type="image/png", data=PNG), TextPart(text="a \ud800")],
     "content[1].text"),
])
def test_a_text_part_that_is_not_text_is_refused_naming_it(parts: list[Any], field: str
                                                            ) -> None:
    with pytest.raises(InvalidInput) as caught:
        TurnInput(provider="openai", model="gpt-4o", system_prompt="", content=parts)
    assert caught.value.field == field
