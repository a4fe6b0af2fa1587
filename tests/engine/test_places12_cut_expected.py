"""``TurnInput.expect`` names what a cut finds (places12): without ``replace_from`` it
names nothing and is refused, naming the field; with it, the engine hands it to the
store's begin as ``TurnStart.expect``."""

from __future__ import annotations

import pytest

from turnstate import CutExpected, InvalidInput, TurnInput


def test_expect_without_replace_from_is_invalid_input() -> None:
    with pytest.raises(InvalidInput) as refused:
        TurnInput(provider="openai", model="gpt-4o", system_prompt="", user_text="hi",
                  expect=CutExpected(key_checked=True))
    assert refused.value.field == "expect"


def test_expect_with_replace_from_is_kept() -> None:
    expect = CutExpected(key_holder="t0", key_checked=True)
    turn = TurnInput(provider="openai", model="gpt-4o", system_prompt="", user_text="hi",
                     replace_from=3, expect=expect)
    assert turn.expect is expect
