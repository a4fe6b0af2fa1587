"""``alternating_history``: a replayed history laid out user first, alternating (replay7)."""

from __future__ import annotations

from datetime import UTC, datetime

from turnstate.core._conversation import Message, MessageStatus, Role, TextPart
from turnstate.core._replay_roles import MISSING_ANSWER, MISSING_QUESTION, alternating_history

NOW = datetime(2026, 12, 5, tzinfo=UTC)


def message(seq: int, role: Role, text: str) -> Message:
    return Message(id=f"m{seq}", chat_id="c", seq=seq, role=role,
                   status=MessageStatus.COMPLETED, parts=(TextPart(text=text),),
                   created_at=NOW, updated_at=NOW)


def test_an_alternating_history_is_sent_as_it_is() -> None:
    history = tuple(message(n, Role.USER if n % 2 else Role.ASSISTANT, f"t{n}")
                    for n in range(1, 401))
    assert alternating_history(history) == (history, 0, 0)
    assert alternating_history(history)[0] is history
    assert alternating_history(()) == ((), 0, 0)


def test_each_gap_gets_its_own_placeholder_with_an_id_of_its_own() -> None:
    history = (message(2, Role.ASSISTANT, "a"), message(3, Role.USER, "q"),
               message(4, Role.USER, "q2"))
    shaped, gaps, blanks = alternating_history(history)
    assert [(m.role, m.parts[0].text) for m in shaped] == [  # type: ignore[union-attr]
        (Role.USER, MISSING_QUESTION), (Role.ASSISTANT, "a"), (Role.USER, "q"),
        (Role.ASSISTANT, MISSING_ANSWER), (Role.USER, "q2"), (Role.ASSISTANT, MISSING_ANSWER)]
    assert (gaps, blanks) == (3, 0)
    assert len({m.id for m in shaped}) == len(shaped)
