"""Does a replay fit the model's context window, and what to drop when it may not.

Before a replay or local-loop request the engine estimates the input (about four
characters per token, as the context snapshot does) and compares it with the model's
context limit. ``OverflowPolicy.ABORT`` (the default) ends the turn ``context_overflow``
before any request, naming both figures. ``OverflowPolicy.TRIM`` drops the oldest whole
turns of the history (a user message and everything up to the next one, so a tool call
is never separated from its result) until the estimate fits; the engine records the cut
in the turn's audit. If even the turn alone does not fit, it aborts the same way.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import attrs

from turnstate.core._context import CHARS_PER_TOKEN, OverflowPolicy, part_chars
from turnstate.core._conversation import Message, Role


@attrs.frozen(kw_only=True)
class ContextFit:
    """The outcome of the check: how many oldest messages to leave out (0: none) and
    the estimated input tokens with them left out."""

    dropped: int
    estimated_tokens: int
    context_limit: int

    @property
    def fits(self) -> bool:
        return self.estimated_tokens <= self.context_limit

    def detail(self) -> str:
        """The abort's detail: the figures, for the user and the logs."""
        trimmed = f" after trimming {self.dropped} messages" if self.dropped else ""
        return (f"the request would need about {self.estimated_tokens:,} input tokens"
                f"{trimmed}, over the model's context limit of {self.context_limit:,}")

    def audit(self, history: Sequence[Message]) -> dict[str, int]:
        """What the audit records of a trim: the cut and the figures."""
        return {"droppedMessages": self.dropped, "throughSeq": history[self.dropped - 1].seq,
                "estimatedTokens": self.estimated_tokens, "contextLimit": self.context_limit}


def turn_starts(history: Sequence[Message]) -> list[int]:
    """Where each whole turn of ``history`` starts (its user messages), oldest first."""
    return [i for i, message in enumerate(history) if message.role == Role.USER]


def fit_context(
    history: Sequence[Message],
    *,
    other_chars: int,
    context_limit: int,
    policy: OverflowPolicy,
) -> ContextFit:
    """Check ``history`` plus ``other_chars`` (system prompt, tools, the turn's own
    input) against ``context_limit``; under ``trim``, drop the fewest oldest whole turns
    that make it fit (all of them when nothing does)."""
    sizes = [part_chars(message.parts) for message in history]
    total = other_chars + sum(sizes)

    def tokens(chars: int) -> int:
        return math.ceil(chars / CHARS_PER_TOKEN)

    if tokens(total) <= context_limit or policy is not OverflowPolicy.TRIM:
        return ContextFit(dropped=0, estimated_tokens=tokens(total), context_limit=context_limit)
    cuts = [i for i in turn_starts(history) if i > 0] + [len(history)]
    dropped = 0
    for cut in cuts:
        total -= sum(sizes[dropped:cut])
        dropped = cut
        if tokens(total) <= context_limit:
            break
    return ContextFit(dropped=dropped, estimated_tokens=tokens(total),
                      context_limit=context_limit)
