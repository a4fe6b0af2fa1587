"""A user text part with a ``phase`` is ``InvalidInput`` naming it (hunt-api).

``TextPart.phase`` is OpenAI's assistant-message phase. ``TurnInput`` took any value
on a user part: the turn ran and committed it, and the stored parts' reader then refused
the message (``phase: expected a string, got int``), so ``list_messages``,
``load_history`` and every later replay of that chat failed with ``StorageError``.
A user message's text never has a phase (none is sent), so any is refused.
"""

from __future__ import annotations

import pytest

from turnstate import InvalidInput, TextPart, TurnInput


@pytest.mark.parametrize("phase", [5, "commentary", "\udcff", ["x"]])
def test_a_user_text_part_with_a_phase_is_refused_naming_it(phase: object) -> None:
    with pytest.raises(InvalidInput) as caught:
        TurnInput(provider="openai", model="gpt-4o", system_prompt="",
                  content=(TextPart(text="a"), TextPart(text="b", phase=phase)))  # type: ignore[arg-type]
    assert caught.value.field == "content[1].phase"

