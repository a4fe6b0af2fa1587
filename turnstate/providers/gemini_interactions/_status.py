"""An interaction's ``status`` as a finish reason (providers-wire.md 2.3).

``requires_action`` (the model called a function), or any function call, gives
``tool_calls``; ``incomplete`` and ``budget_exceeded`` give ``length``; ``completed`` (or
no status) gives ``stop``; any other terminal status passes through as the provider's
own (the turn's finish ``other``). ``failed`` raises before this is read
(``_parser.failed_error``). ``cancelled`` (someone cancelled the interaction: turnstate
never does) is no finished answer: as a cancelled turn is in turnstate, the turn
aborts, with a ``FatalProviderError`` whose ``code`` is ``cancelled``, nothing of it
committed (it was the finish ``other``, the fragment committed as the answer).
``in_progress`` and ``queued`` (``PENDING_STATUSES``) say the interaction has not
finished: what came so far is a fragment, never an answer, so they raise a retryable
``TransientProviderError`` whose ``code`` is the status.
"""

from __future__ import annotations

from collections.abc import Sequence

from turnstate.core._conversation import Part, ToolCallPart
from turnstate.core._errors import TransientProviderError
from turnstate.providers._errors import CANCELLED, cancelled_error
from turnstate.providers.gemini_interactions._errors import PROVIDER

PENDING_STATUSES = frozenset({"in_progress", "queued"})
"""Statuses of an interaction still running (or waiting to run) on the server."""


def finish_reason(status: str | None, parts: Sequence[Part]) -> str:
    """The normalised finish reason of a finished interaction.

    Raises:
        TransientProviderError: ``status`` is in ``PENDING_STATUSES``.
    """
    if status in PENDING_STATUSES:
        msg = (f"the interaction ended its stream with status {status!r}: it has not "
               "finished, so what it said is no answer")
        raise TransientProviderError(PROVIDER, msg, code=status)
    if status == CANCELLED:
        raise cancelled_error(PROVIDER, "interaction")
    if status in ("incomplete", "budget_exceeded"):
        return "length"
    if status == "requires_action" or any(isinstance(p, ToolCallPart) for p in parts):
        return "tool_calls"
    if status in (None, "completed"):
        return "stop"
    return status
