"""Does a replay fit the model's context window, and what to drop when it may not.

Before a replay or local-loop request the engine estimates the input (about four
characters per token, as the context snapshot does) and compares it with the model's
context limit. ``OverflowPolicy.ABORT`` (the default) ends the turn ``context_overflow``
before any request, naming both figures. ``OverflowPolicy.TRIM`` drops the oldest whole
turns of the history (a user message and everything up to the next one, so a tool call
is never separated from its result) until the estimate fits; the engine records the cut
in the turn's audit. If even the turn alone does not fit, it aborts the same way.

A trim cuts at fixed points, not just past the oldest turns that must go: the first
turn start after every ``TRIM_STEP_RATIO`` of the window, counted from the chat's first
message (so a point never moves as the chat grows). A chat at its window then keeps the
same first message for a fifth of a window's growth, and the provider's prompt cache
(a prefix cache everywhere) keeps hitting: cutting the fewest turns moved the start of
the history every turn, and every request of a full chat missed its cache past the
system prompt and tools.

The estimate can be far below the provider's own count (CJK text, code, base64-like
text). When the provider refuses a replay or a local loop as too long, ``recalibrate``
learns a scale from the refusal (its figures when it gives them) and the request is
trimmed again under the scaled estimate (``context_refused``, a declared self-edge);
``ContextCalibrations`` remembers the scale per chat for the next turns.

A window the provider names in a refusal (``ContextLengthExceeded.context_limit``) is
believed only within bounds (``sane_window``): not below ``MIN_LEARNT_WINDOW``, not
above the registry's window; it is the provider's latest word (a later refusal naming
another window replaces it), and it is forgotten ``WINDOW_SECONDS`` after it was learnt.
An error message saying the window is 1 once made every later replay of the chat abort
``context_overflow`` for the life of the process.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence

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
    scale: float = 1.0,
) -> ContextFit:
    """Check ``history`` plus ``other_chars`` (system prompt, tools, the turn's own
    input) against ``context_limit``; under ``trim``, drop the oldest whole turns up to
    the first of the fixed cut points (``trim_points``) that makes it fit, else the
    fewest oldest whole turns that do (all of them when nothing does). ``scale``: the
    provider's tokens per estimated token, as learnt for the chat (``recalibrate``); the
    estimate is multiplied by it."""
    sizes = [part_chars(message.parts) for message in history]
    total = other_chars + sum(sizes)

    def tokens(chars: int) -> int:
        return math.ceil(chars * scale / CHARS_PER_TOKEN)

    if tokens(total) <= context_limit or policy is not OverflowPolicy.TRIM:
        return ContextFit(dropped=0, estimated_tokens=tokens(total), context_limit=context_limit)
    starts = [i for i in turn_starts(history) if i > 0]
    step = max(1, math.floor(context_limit * TRIM_STEP_RATIO * CHARS_PER_TOKEN / scale))
    for cuts in (trim_points(starts, sizes, step), [*starts, len(history)]):
        kept, dropped = total, 0
        for cut in cuts:
            kept -= sum(sizes[dropped:cut])
            dropped = cut
            if tokens(kept) <= context_limit:
                return ContextFit(dropped=dropped, estimated_tokens=tokens(kept),
                                  context_limit=context_limit)
    return ContextFit(dropped=dropped, estimated_tokens=tokens(kept),
                      context_limit=context_limit)


TRIM_STEP_RATIO = 0.2
"""How far apart a trim's cut points are, as a share of the window (module docstring):
a full chat sends between 80% and 100% of its window, and its prompt cache misses once
per fifth of a window it grows, instead of on every turn."""


def trim_points(starts: Sequence[int], sizes: Sequence[int], step: int) -> list[int]:
    """The turn starts a trim may cut at: the first at or after every ``step`` characters
    of history from its first message (fixed as the chat grows; ``starts`` ascending)."""
    points: list[int] = []
    before, at, boundary = 0, 0, step
    for start in starts:
        before += sum(sizes[at:start])
        at = start
        if before >= boundary:
            points.append(start)
            boundary = (before // step + 1) * step
    return points


MAX_SCALE = 64.0
"""The most provider tokens per estimated token a chat is taken to have (a character per
token is 4; a base64 or emoji-heavy text may reach several times that)."""
UNKNOWN_FIGURES_FACTOR = 2.0
"""How much the scale grows after a refusal that does not say the provider's count."""


def recalibrate(scale: float, sent_tokens: int, *, refused_tokens: int | None,
                window: int) -> float:
    """The scale after the provider refused a request whose scaled estimate was
    ``sent_tokens``: its own count over the estimate when it said it (``refused_tokens``),
    else at least ``UNKNOWN_FIGURES_FACTOR`` times more (and enough to pass ``window``,
    which the refused input exceeded). Never less than before, at most ``MAX_SCALE``."""
    sent = max(1, sent_tokens)
    if refused_tokens is not None and refused_tokens > 0:
        factor = refused_tokens / sent
    else:
        factor = max(UNKNOWN_FIGURES_FACTOR, (window + 1) / sent)
    return min(MAX_SCALE, max(scale, scale * factor))


def measured_scale(scale: float, sent_tokens: int, reported_tokens: int) -> float:
    """The scale a successful request's reported input tokens give (the request's scaled
    estimate was ``sent_tokens``), between 1 and ``MAX_SCALE``."""
    if sent_tokens <= 0 or reported_tokens <= 0:
        return scale
    return min(MAX_SCALE, max(1.0, scale * reported_tokens / sent_tokens))


MIN_LEARNT_WINDOW = 1024
"""The smallest window (tokens) a provider's error is believed to name: no chat model has
less, so a smaller figure is a misread message (or a proxy's garbage), not a window."""
WINDOW_SECONDS = 3600.0
"""How long a learnt window is believed (then the registry's again, until a refusal
names one anew): a deployment's window can grow, and a wrong figure must not live on."""


def sane_window(said: int | None, registry_window: int) -> int | None:
    """The window a provider's refusal names, if believable: from ``MIN_LEARNT_WINDOW``
    up to the registry's window for the model (a larger one constrains nothing); else
    None (the refusal's other figures still count)."""
    if said is None or type(said) is not int:
        return None
    if said < MIN_LEARNT_WINDOW or said > registry_window:
        return None
    return said


@attrs.frozen
class Calibration:
    """What a chat's refusals taught: the provider's tokens per estimated token, and the
    window the provider said it enforces (None: the registry's). ``learnt_at``: when the
    window was first said (``ContextCalibrations``' clock), for its expiry; not compared."""

    scale: float = 1.0
    window: int | None = None
    learnt_at: float = attrs.field(default=0.0, eq=False)


NO_CALIBRATION = Calibration()

CalibrationKey = tuple[str, str, str]
"""A chat, its provider and its model: a tokenizer and a window are the model's."""


class ContextCalibrations:
    """What each chat learnt (``Calibration``), in the engine's memory: a hint for how
    much a replay trims, never continuation state (a chat it forgot, after a restart or
    on another process, learns it again from one refusal). Keeps at most ``size``
    entries, the oldest learnt forgotten first; an entry back at ``NO_CALIBRATION``
    is dropped. A window is forgotten ``window_seconds`` after it was first learnt
    (``clock``: monotonic seconds), the scale kept."""

    __slots__ = ("clock", "learnt", "size", "window_seconds")

    def __init__(self, size: int = 4096, *, window_seconds: float = WINDOW_SECONDS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.size, self.window_seconds, self.clock = size, window_seconds, clock
        self.learnt: dict[CalibrationKey, Calibration] = {}

    def get(self, key: CalibrationKey) -> Calibration:
        learnt = self.learnt.get(key, NO_CALIBRATION)
        if learnt.window is not None and self.clock() - learnt.learnt_at > self.window_seconds:
            learnt = Calibration(scale=learnt.scale)  # expired: the registry's window again
            self.learn(key, learnt)
        return learnt

    def learn(self, key: CalibrationKey, calibration: Calibration) -> None:
        before = self.learnt.pop(key, None)
        if calibration == NO_CALIBRATION:
            return
        if calibration.window is not None:  # its age: since the window was first said
            kept = before is not None and before.window == calibration.window
            calibration = attrs.evolve(
                calibration, learnt_at=before.learnt_at if kept and before else self.clock())
        if len(self.learnt) >= self.size:
            del self.learnt[next(iter(self.learnt))]
        self.learnt[key] = calibration
