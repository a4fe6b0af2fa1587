"""Every way the table can abort a turn reads as words in the AI SDK's error, not as its
reason code (``deadline_exceeded`` showed as "Aborted: deadline_exceeded")."""

from __future__ import annotations

import pytest

from turnstate.server._ui_stream import ABORT_TEXT, UiStream
from turnstate.states._table import TRANSITIONS, State

REASONS = sorted({edge.trigger.value for edge in TRANSITIONS if edge.dest is State.ABORT}
                 - {"cancelled", "stopped"})  # these end as the SDK's ``abort`` chunk


@pytest.mark.parametrize("reason", REASONS)
def test_an_abort_reason_of_the_table_has_words(reason: str) -> None:
    stream = UiStream("m1")
    stream.start()
    chunks = stream.chunks("turn_aborted", {"reason": reason, "detail": "x", "path": []})
    error = next(chunk for chunk in chunks if chunk["type"] == "error")
    assert error["errorText"] == f"Aborted: {ABORT_TEXT[reason]} (x)"
    assert reason not in ABORT_TEXT[reason]
