"""``GenerationSettings``' ``stop`` and ``metadata`` given in a shape they cannot take
are ``InvalidInput`` naming the field; ``stop=None`` is "not given" (hunt-api).

The class says a None field is not sent, but ``stop=None`` raised ``tuple``'s bare
``TypeError``; a number for ``stop`` did the same, and a list or a number for
``metadata`` raised ``dict``'s bare ``TypeError`` or ``ValueError``.
"""

from __future__ import annotations

from typing import Any

import pytest

from turnstate import GenerationSettings, InvalidInput


@pytest.mark.parametrize(("changes", "field"), [
    ({"stop": 5}, "settings.stop"),
    ({"metadata": [1]}, "settings.metadata"),
    ({"metadata": 5}, "settings.metadata"),
    ({"metadata": "ab"}, "settings.metadata"),
])
def test_a_shape_the_field_cannot_take_is_refused_naming_it(changes: dict[str, Any],
                                                            field: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        GenerationSettings(**changes)
    assert caught.value.field == field


def test_none_is_not_given_for_every_field() -> None:
    assert GenerationSettings(stop=None, metadata=None).given() == ()  # type: ignore[arg-type]
    assert GenerationSettings(stop="END").stop == ("END",)
    assert dict(GenerationSettings(metadata=[("k", "v")]).metadata) == {"k": "v"}  # type: ignore[arg-type]
