"""Context pressure: how full the model's context window is after a turn.

The snapshot uses the provider's reported input tokens when there are any, otherwise
an estimate of about four characters per token over everything the model sees. The
severity bands (DESIGN.md section 6) drive the server's context meter.

A provider whose usage on a cursor turn counts only the new input
(``PARTIAL_CURSOR_USAGE``: Gemini Interactions, whose ``previous_interaction_id`` turns
report the new steps alone) would leave a long chat's meter near empty; such a turn's
snapshot takes the larger of the reported count and the estimate over the stored
history and the turn (``source`` ``estimate`` when the estimate wins).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Iterator
from enum import StrEnum
from typing import TypeVar

import attrs

from turnstate.core._conversation import (
    Message,
    Part,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)
from turnstate.core._cost import CachePolicy
from turnstate.core._errors import InvalidInput
from turnstate.core._frozen import slot_maker
from turnstate.core._media import FilePart, ImagePart
from turnstate.core._media_tokens import NEUTRAL, media_tokens
from turnstate.core._registry import DEFAULT_REGISTRY, Registry

CHARS_PER_TOKEN = 4


class Severity(StrEnum):
    """How full the context window is, in the bands of ``severity_for``."""

    NORMAL = "normal"
    INFO = "info"
    WARNING = "warning"
    DANGER = "danger"
    CRITICAL = "critical"


_BANDS: tuple[tuple[float, Severity], ...] = (
    (0.70, Severity.NORMAL),
    (0.85, Severity.INFO),
    (0.92, Severity.WARNING),
    (0.97, Severity.DANGER),
)


def severity_for(ratio: float) -> Severity:
    """Below 0.70 normal, below 0.85 info, below 0.92 warning, below 0.97 danger, else critical.

    NaN counts as critical: an unknown fill level is not a reason to relax.
    """
    for upper, severity in _BANDS:
        if ratio < upper:
            return severity
    return Severity.CRITICAL


def estimate_tokens(*texts: str | Iterable[str], chars: int = 0) -> int:
    """About four characters per token, rounded up, over every text given.

    Accepts strings and iterables of strings, so a caller can pass the system prompt,
    the turn's texts and the tool schemas in one call; ``chars`` adds characters
    counted earlier (a chat's ``history_chars``, kept by the store).
    """
    for item in texts:
        if isinstance(item, str):
            chars += len(item)
        else:
            chars += sum(len(text) for text in item)
    return math.ceil(chars / CHARS_PER_TOKEN)


def part_texts(parts: Iterable[Part]) -> Iterator[str]:
    """The texts of ``parts`` the model sees: text, reasoning, calls, tool outputs."""
    for part in parts:
        if isinstance(part, TextPart | ReasoningPart):
            yield part.text
        elif isinstance(part, ToolCallPart):
            yield part.name
            yield part.arguments
        elif isinstance(part, ToolResultPart):
            yield part.output


def part_chars(parts: Iterable[Part]) -> int:
    """How many characters of ``parts`` count towards the context estimate.

    Stores keep the sum over a chat's committed history as ``history_chars``, so a
    turn estimates its context without reading the history. An image or a PDF counts
    as the characters of its tokens under the provider-neutral rule
    (``media_chars``).
    """
    parts = tuple(parts)
    chars = 0
    for part in parts:  # plain text, most often (a user message, an answer): no generators
        if type(part) is not TextPart:
            return sum(len(text) for text in part_texts(parts)) + media_chars(parts)
        chars += len(part.text)
    return chars


def media_chars(parts: Iterable[Part], provider: str = NEUTRAL) -> int:
    """The images and PDFs of ``parts`` as characters of the text estimate:
    ``media_tokens`` under ``provider``'s documented rule, times ``CHARS_PER_TOKEN``."""
    return CHARS_PER_TOKEN * sum(media_tokens(part, provider) for part in parts
                                 if isinstance(part, ImagePart | FilePart))


PARTIAL_CURSOR_USAGE: frozenset[str] = frozenset({"gemini"})
"""Providers whose reported input on a cursor turn leaves out the conversation they hold
(the recorded Gemini ``multi-turn-stateful`` second turn: 12 input tokens, its new
question alone). OpenAI Responses counts the whole conversation on a
``previous_response_id`` turn (its compaction included), so its count stands."""


def reports_partial_input(provider: str, cursor: bool) -> bool:
    """Whether a turn answered by ``cursor`` reports less input than the model read."""
    return cursor and provider in PARTIAL_CURSOR_USAGE


class TokenSource(StrEnum):
    """Where a snapshot's token count came from."""

    PROVIDER = "provider"
    ESTIMATE = "estimate"


class OverflowPolicy(StrEnum):
    """What a replay or local loop does when its estimated input exceeds the model's
    context limit: ``abort`` before calling (``context_overflow``, the default), or
    ``trim`` the oldest whole turns until it fits (marked in the audit)."""

    ABORT = "abort"
    TRIM = "trim"


_Policy = TypeVar("_Policy", CachePolicy, "OverflowPolicy")


def _cache_policy(value: CachePolicy | str | None) -> CachePolicy | None:
    return None if value is None else _member(CachePolicy, value, "cache")


def _overflow(value: OverflowPolicy | str) -> OverflowPolicy:
    return _member(OverflowPolicy, value, "overflow")


def _member(kind: type[_Policy], value: str, name: str) -> _Policy:
    """``value`` as a member of ``kind``; anything else is ``InvalidInput`` naming
    ``context.<name>`` (it was enum's bare ``ValueError``)."""
    try:
        return kind(value)
    except ValueError:
        field = f"context.{name}"
        choices = ", ".join(member.value for member in kind)
        raise InvalidInput(field, f"{value!r} is not one of {choices}") from None


@attrs.frozen(kw_only=True)
class ContextSettings:
    """Per-request context policy.

    Attributes:
        provider_compaction_enabled: ask providers that support it to compact server-side.
        compact_threshold: OpenAI's ``compact_threshold`` in tokens; None means 80% of the
            model's context limit.
        cache: prompt caching for this request (``CachePolicy``); None takes the
            engine's default (``TurnEngine(cache_policy=...)``, ``auto`` unless set).
        overflow: what a replay or local loop does when the history does not fit the
            model's context window (``OverflowPolicy``).
    """

    provider_compaction_enabled: bool = True
    compact_threshold: int | None = None
    cache: CachePolicy | None = attrs.field(default=None, converter=_cache_policy)
    overflow: OverflowPolicy = attrs.field(default=OverflowPolicy.ABORT, converter=_overflow)

    def threshold_for(self, context_limit: int) -> int:
        """The compaction threshold in tokens for a model with ``context_limit``."""
        if self.compact_threshold is not None:
            return self.compact_threshold
        return int(context_limit * 0.8)


@attrs.frozen(kw_only=True)
class ContextSnapshot:
    """How full the context is, committed as ``chats.last_context_state``."""

    estimated_input_tokens: int
    context_limit: int
    estimated_usage_ratio: float
    severity: Severity
    source: TokenSource
    dropped_history_chars: int = 0
    """Characters of the chat's committed history the provider's conversation does not
    hold: what the trimmed replay its cursor chain began with left out, carried by every
    cursor turn of the chain. Kept for ``PARTIAL_CURSOR_USAGE`` providers only (0
    elsewhere), whose cursor turns estimate the held conversation from it."""


_snapshot: Callable[[int, int, float, Severity, TokenSource, int], ContextSnapshot] = (
    slot_maker(ContextSnapshot))
"""``ContextSnapshot`` without attrs' ``__init__`` (``_frozen``): one a committed turn."""


def context_snapshot(
    *,
    provider: str,
    model: str,
    reported_input_tokens: int | None,
    estimated_tokens: int,
    registry: Registry = DEFAULT_REGISTRY,
    partial: bool = False,
    dropped_history_chars: int = 0,
) -> ContextSnapshot:
    """Build the snapshot: provider-reported tokens win over the estimate, unless
    ``partial`` (``reports_partial_input``): then the larger of the two.
    ``dropped_history_chars`` is recorded as given (``ContextSnapshot``)."""
    limit = registry.model(provider, model).context_limit
    if partial and estimated_tokens > (reported_input_tokens or 0):
        tokens, source = estimated_tokens, TokenSource.ESTIMATE
    elif reported_input_tokens is not None and reported_input_tokens > 0:
        tokens, source = reported_input_tokens, TokenSource.PROVIDER
    else:
        tokens, source = estimated_tokens, TokenSource.ESTIMATE
    ratio = tokens / limit
    # estimated_input_tokens, context_limit, estimated_usage_ratio, severity, source,
    # dropped_history_chars
    return _snapshot(tokens, limit, ratio, severity_for(ratio), source,
                     dropped_history_chars)


_DROPPED = re.compile(r'"droppedHistoryChars"\s*:\s*(\d+)')
"""The figure in a stored snapshot however the store spaced and ordered the JSON
(PostgreSQL's ``jsonb`` writes ``"key": value`` in its own key order)."""


def dropped_chars_of(context_state: str | None) -> int:
    """The ``droppedHistoryChars`` of a stored ``last_context_state``, 0 when it has none.
    One regular-expression search: no JSON parse on a cursor turn (issue 26; the key is
    written only when not 0)."""
    if context_state is None:
        return 0
    found = _DROPPED.search(context_state)
    return int(found.group(1)) if found else 0


def chain_dropped_chars(provider: str, *, cursor: bool, previous_state: str | None,
                        history_chars: int, trimmed_history: Iterable[Message] | None) -> int:
    """What ``provider``'s conversation leaves out of the committed history after this
    turn (``ContextSnapshot.dropped_history_chars``; 0 unless ``PARTIAL_CURSOR_USAGE``):
    a cursor turn carries its chain's figure (the chat's last snapshot's, read without a
    parse); a replay starts a chain, holding all of ``history_chars`` or, when it
    trimmed, the ``trimmed_history`` it sent (summed on the replay, which read it)."""
    if provider not in PARTIAL_CURSOR_USAGE:
        return 0
    if cursor:
        return dropped_chars_of(previous_state)
    if trimmed_history is None:
        return 0
    return max(0, history_chars - sum(part_chars(m.parts) for m in trimmed_history))
