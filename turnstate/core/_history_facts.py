"""What a replay's context fit reads of a committed history, counted once per message.

Before every replay or local-loop request the engine fits the history into the model's
window (``engine._run_fit``): the characters of every message (``part_chars``), where
each turn starts, the latest compaction point, the user messages holding media, the
answers whose tool calls and results do not pair, whether the roles alternate. Counted
over the whole history, that was Python work per message on every turn (about 6 ms at
2,000 messages), even when the request itself sends only the window's worth.

``HistoryFacts`` holds those figures by message index, and ``extended`` adds a few new
messages' figures to them: the engine's history cache (``engine._histories``) keeps them
with the history and extends them with the messages committed since, so a turn counts
its new messages only and the fit reads the figures (a bisection for a trim). A history
that carries its facts is a ``CountedHistory`` (a tuple, equal to the plain one); any
other history (trimmed, laid out anew) is counted as before.
"""

from __future__ import annotations

import math
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Sequence

import attrs

from turnstate.core._context import CHARS_PER_TOKEN, OverflowPolicy, part_chars
from turnstate.core._conversation import (
    Message,
    OpaquePart,
    Part,
    Role,
    TextPart,
)
from turnstate.core._overflow import TRIM_STEP_RATIO, ContextFit
from turnstate.core._replay_roles import _blank
from turnstate.core._tool_pairs import call_ids

_USER = Role.USER
_ASSISTANT = Role.ASSISTANT


@attrs.frozen(kw_only=True, eq=False)
class HistoryFacts:
    """A history's figures by message index (the module docstring). The arrays are
    never changed once made: ``extended`` makes new ones."""

    chars: array[int]
    """``chars[i]``: the counted characters of messages ``[0, i)`` (``len + 1`` items)."""
    starts: array[int]
    """The indexes of the user messages (where each whole turn starts), ascending."""
    opaque: array[int]
    """The indexes of the messages holding an opaque part (compaction candidates)."""
    media: array[int]
    """The indexes of the user messages holding a part other than text."""
    unpaired: array[int]
    """The indexes of the answers whose tool calls and results do not pair."""
    alternates: bool
    """Every message so far has its turn's role (user first) and is not blank."""

    @property
    def length(self) -> int:
        return len(self.chars) - 1

    @property
    def laid_out(self) -> bool:
        """What ``alternating_history`` leaves as it is: alternating, ending with an
        answer."""
        return self.alternates and self.length % 2 == 0

    @property
    def nbytes(self) -> int:
        """What the arrays hold, in bytes (for the cache's bound)."""
        return sum(len(a) * a.itemsize for a in (self.chars, self.starts, self.opaque,
                                                   self.media, self.unpaired))


NO_FACTS = HistoryFacts(chars=array("q", [0]), starts=array("q"), opaque=array("q"),
                        media=array("q"), unpaired=array("q"), alternates=True)


def _unpaired(parts: Sequence[Part]) -> bool:
    calls, results = call_ids(parts)
    return calls != results


def extended(facts: HistoryFacts, messages: Iterable[Message]) -> HistoryFacts:
    """``facts`` of a history with ``messages`` appended to it."""
    chars, starts, opaque = array("q", facts.chars), array("q", facts.starts), \
        array("q", facts.opaque)
    media, unpaired = array("q", facts.media), array("q", facts.unpaired)
    alternates = facts.alternates
    index = facts.length
    total = chars[-1]
    for message in messages:
        parts = message.parts
        total += part_chars(parts)
        chars.append(total)
        plain = len(parts) == 1 and type(parts[0]) is TextPart
        role = message.role
        if role is _USER or role == "user":
            starts.append(index)
            if not plain and not all(type(p) is TextPart for p in parts):
                media.append(index)
        elif not plain and _unpaired(parts):
            unpaired.append(index)
        if not plain and any(type(p) is OpaquePart for p in parts):
            opaque.append(index)
        if alternates:
            expected = _USER if index % 2 == 0 else _ASSISTANT
            alternates = role is expected and not _blank(parts, expected)
        index += 1
    return HistoryFacts(chars=chars, starts=starts, opaque=opaque, media=media,
                        unpaired=unpaired, alternates=alternates)


def facts_of(history: Sequence[Message]) -> HistoryFacts:
    return extended(NO_FACTS, history)


class CountedHistory(tuple[Message, ...]):
    """A history (a tuple of messages, equal to the plain one) with its ``facts``."""

    facts: HistoryFacts

    def __new__(cls, messages: Iterable[Message], facts: HistoryFacts) -> CountedHistory:
        made = super().__new__(cls, messages)
        if facts.length != len(made):
            msg = "a history's facts count another number of messages"
            raise ValueError(msg)
        made.facts = facts
        return made


def facts_for(history: Sequence[Message]) -> HistoryFacts | None:
    """The facts ``history`` carries (a ``CountedHistory``), else None."""
    return history.facts if type(history) is CountedHistory else None


def fit_counted(facts: HistoryFacts, offset: int, *, other_chars: int, context_limit: int,
                policy: OverflowPolicy, scale: float = 1.0) -> ContextFit:
    """``fit_context`` of the history's messages from ``offset`` on, read off ``facts``:
    the same figures, without counting a message."""
    chars, starts = facts.chars, facts.starts
    end = facts.length
    base = chars[offset]
    total = other_chars + chars[end] - base

    def tokens(count: int) -> int:
        return math.ceil(count * scale / CHARS_PER_TOKEN)

    if tokens(total) <= context_limit or policy is not OverflowPolicy.TRIM:
        return ContextFit(dropped=0, estimated_tokens=tokens(total), context_limit=context_limit)

    def before(at: int) -> int:  # the characters of the checked messages before ``at``
        return chars[at] - base

    first = bisect_right(starts, offset)  # the turn starts after the checked first message
    step = max(1, math.floor(context_limit * TRIM_STEP_RATIO * CHARS_PER_TOKEN / scale))
    boundary, at = step, first
    while True:  # the fixed cut points (``trim_points``), oldest first
        at = bisect_left(starts, base + boundary, lo=at, key=chars.__getitem__)
        if at >= len(starts):
            break
        kept = total - before(starts[at])
        if tokens(kept) <= context_limit:
            return ContextFit(dropped=starts[at] - offset, estimated_tokens=tokens(kept),
                              context_limit=context_limit)
        boundary = (before(starts[at]) // step + 1) * step
        at += 1
    # the fewest oldest whole turns that fit: the first start whose cut fits, else all
    count = len(starts)

    def cut_at(i: int) -> int:
        return starts[i] if i < count else end

    found = bisect_left(range(first, count + 1), True,
                        key=lambda i: tokens(total - before(cut_at(i))) <= context_limit)
    cut = cut_at(min(first + found, count))
    return ContextFit(dropped=cut - offset, estimated_tokens=tokens(total - before(cut)),
                      context_limit=context_limit)
