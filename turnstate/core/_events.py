"""The events a turn yields, in a stable, documented order.

Every event is frozen and carries a ``type`` tag (the reference server's SSE event
name). For one turn, in order:

1. ``continuation_degraded`` then ``fallback_notice``, when validation (or a cursor loss
   in ``cursor``) degrades the turn; then the ``state_changed`` of the edge it causes.
2. ``state_changed`` for every transition, right after it happened.
3. Inside a provider call: ``reasoning_delta`` / ``text_delta`` as they stream, and
   ``image_output`` for each image the model generates, whole.
4. In ``tool_iteration``: one ``tool_call`` per call in the model's order, then one
   ``tool_result`` per call in the same order once all have finished.
5. On commit: ``context_snapshot``, the ``state_changed`` to ``done``, ``turn_completed``.
   On abort: the ``state_changed`` to ``aborted``, then ``turn_aborted``.

The last event is always ``turn_completed`` or ``turn_aborted`` and carries the turn's
path (every step: source, trigger, destination, reason).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal, TypeVar

import attrs

from turnstate.core._citations import Citation, citations_field
from turnstate.core._context import ContextSnapshot
from turnstate.core._conversation import Usage
from turnstate.core._cost import TurnCost
from turnstate.core._frozen import slot_maker
from turnstate.core._path import PathStep

_Tag = TypeVar("_Tag", bound=str)


def _tag(name: _Tag) -> _Tag:
    """The event's ``type``: typed as its one ``Literal`` value, so a check of
    ``event.type`` narrows ``TurnEvent`` to that event's class for a type checker."""
    return attrs.field(default=name, init=False)


@attrs.frozen(kw_only=True)
class StateChanged:
    source: str
    trigger: str
    dest: str
    reason: str | None = None
    type: Literal["state_changed"] = _tag("state_changed")


_state_changed_slots = tuple(StateChanged.__dict__[name].__set__
                             for name in ("source", "trigger", "dest", "reason", "type"))


_CHANGES: dict[tuple[str, str, str, str | None], StateChanged] = {}
"""Each edge's event by its fields: frozen, so one value serves every turn that takes the
edge with that reason (at most ``_CHANGES_KEPT``; a reason is a code)."""
_CHANGES_KEPT = 1024


def state_changed(source: str, trigger: str, dest: str, reason: str | None) -> StateChanged:
    """``StateChanged(...)``, a turn's per-edge event, made once per edge and reason, and
    without attrs' frozen ``__init__`` (as ``text_delta_event``): the same class and
    slots, so an equal value (tested)."""
    key = (source, trigger, dest, reason)
    value = _CHANGES.get(key)
    if value is None:
        value = _state_changed(source, trigger, dest, reason)
        if len(_CHANGES) < _CHANGES_KEPT:
            _CHANGES[key] = value
    return value


def _state_changed(source: str, trigger: str, dest: str, reason: str | None) -> StateChanged:
    value: StateChanged = object.__new__(StateChanged)
    set_source, set_trigger, set_dest, set_reason, set_type = _state_changed_slots
    set_source(value, source)
    set_trigger(value, trigger)
    set_dest(value, dest)
    set_reason(value, reason)
    set_type(value, "state_changed")
    return value


@attrs.frozen(kw_only=True)
class ContinuationDegraded:
    """The stored cursor was not used (``reason`` is the degradation code)."""

    reason: str
    strategy: str
    source_state: str
    type: Literal["continuation_degraded"] = _tag("continuation_degraded")


@attrs.frozen(kw_only=True)
class FallbackNotice:
    """A human-readable notice for the UI (the toast)."""

    reason: str
    message: str
    type: Literal["fallback_notice"] = _tag("fallback_notice")


@attrs.frozen(kw_only=True)
class TextDeltaEvent:
    text: str
    type: Literal["text_delta"] = _tag("text_delta")


text_delta_event: Callable[[str], TextDeltaEvent] = slot_maker(TextDeltaEvent)
"""``TextDeltaEvent(text=text)``, a turn's per-delta event, without attrs' frozen
``__init__`` (``_frozen``): the same class and slots, so an equal value (tested)."""


@attrs.frozen(kw_only=True)
class ReasoningDeltaEvent:
    text: str
    type: Literal["reasoning_delta"] = _tag("reasoning_delta")


def _size_repr(data: bytes) -> str:
    return f"<{len(data):,} bytes>"


@attrs.frozen(kw_only=True)
class ImageOutputEvent:
    """An image the model generated, whole, as it streamed (``core._media_output``):
    the same bytes the answer keeps as an ``ImagePart``. As JSON its ``data`` is base64."""

    media_type: str
    data: bytes = attrs.field(repr=_size_repr)
    type: Literal["image_output"] = _tag("image_output")


@attrs.frozen(kw_only=True)
class ToolCallEvent:
    call_id: str
    name: str
    arguments: str
    iteration: int
    type: Literal["tool_call"] = _tag("tool_call")


@attrs.frozen(kw_only=True)
class ToolResultEvent:
    call_id: str
    name: str
    output: str
    is_error: bool
    iteration: int
    type: Literal["tool_result"] = _tag("tool_result")


@attrs.frozen(kw_only=True)
class ContextSnapshotEvent:
    snapshot: ContextSnapshot
    type: Literal["context_snapshot"] = _tag("context_snapshot")


@attrs.frozen(kw_only=True)
class TurnStats:
    """What a turn cost: provider requests, the bytes they carried, tokens, and money.

    ``requests`` counts the turn's provider calls (one per model response asked for) and
    ``request_bytes`` the bodies of those calls; ``retries`` the HTTP requests sent beyond
    the first of each call (the transport's retries of a refused or failed request and
    restarts of a stream that failed before showing anything), so ``requests + retries``
    is every HTTP request sent. A provider bills each retry it answered: its usage is in
    ``usage`` and ``cost`` (a cut one's, when known). ``cost`` is the turn's cost in USD
    at the model's list price (``TurnCost``: total and breakdown, Decimals); None when
    the registry has no price for the model or part of the bill is unknown.
    """

    requests: int = 0
    request_bytes: int = 0
    tool_calls: int = 0
    usage: Usage = attrs.field(factory=Usage)
    cost: TurnCost | None = None
    retries: int = 0


NO_STATS = TurnStats()
"""A turn's stats before its first request: one frozen value shared by every turn (its
``usage`` the zero ``Usage``), not two records built per turn (issue 26)."""


FINISH_REASONS = ("stop", "length", "content_filter", "refusal", "other")
"""Why a completed turn's answer ended, as ``TurnCompleted.finish_reason`` says it."""


def user_finish_reason(normalised: str | None) -> str:
    """A parser's normalised finish reason → one of ``FINISH_REASONS`` (a completed
    answer with no reason, or one that ended on tool calls, ``stop``)."""
    if normalised in (None, "stop", "tool_calls"):
        return "stop"
    return normalised if normalised in FINISH_REASONS else "other"


@attrs.frozen(kw_only=True)
class TurnCompleted:
    """The turn committed. ``finish_reason`` is ``stop``, ``length`` (cut at the output
    limit), ``content_filter``, ``refusal`` or ``other``; ``finish_reason_raw`` is the
    provider's own value (``max_tokens``, ``incomplete``, ...). ``citations`` are the
    sources the answer's text cites (those of its text parts after the last tool
    result, in order; ``core._citations``), empty when it cites none."""

    turn_id: str
    chat_id: str
    strategy: str
    degradation: str | None
    path: tuple[PathStep, ...]
    text: str
    stats: TurnStats
    finish_reason: str = "stop"
    finish_reason_raw: str | None = None
    citations: tuple[Citation, ...] = citations_field()
    type: Literal["turn_completed"] = _tag("turn_completed")


turn_completed: Callable[[str, str, str, str | None, tuple[PathStep, ...], str, TurnStats, str,
                          str | None, tuple[Citation, ...]], TurnCompleted] = (
    slot_maker(TurnCompleted))
"""``TurnCompleted(...)`` of its fields in order (``type`` aside: turn_id, chat_id,
strategy, degradation, path, text, stats, finish_reason, finish_reason_raw, citations), a turn's
last event, without attrs' ``__init__`` (``_frozen``): an equal value (tested)."""


@attrs.frozen(kw_only=True)
class ProviderFailure:
    """The facts of the provider failure that aborted a turn.

    Attributes:
        provider: the provider's registry name.
        status: the HTTP status, None for in-stream errors and lost connections.
        error_type: turnstate's class of the failure: ``rate_limited``, ``transient``,
            ``cursor_rejected``, ``fatal``, ``protocol_error``, ``stream_limit`` or
            ``pool_exhausted``.
        code: the provider's error code or type (scrubbed), when it sent one.
        retryable: whether the same request may succeed later (rate limits, 5xx,
            overload, timeouts); the transport already retried it before any output.
        retry_after: the seconds the provider asked to wait (``Retry-After``), if any.
    """

    provider: str
    status: int | None
    error_type: str
    code: str | None = None
    retryable: bool = False
    retry_after: float | None = None


@attrs.frozen(kw_only=True)
class TurnAborted:
    """The turn ended without a commit. ``failure`` carries the provider's facts when
    a provider call ended it, None for other reasons (cancelled, limits, storage)."""

    turn_id: str
    chat_id: str
    reason: str
    detail: str | None
    strategy: str | None
    degradation: str | None
    path: tuple[PathStep, ...]
    stats: TurnStats
    failure: ProviderFailure | None = None
    type: Literal["turn_aborted"] = _tag("turn_aborted")


TurnEvent = (
    StateChanged
    | ContinuationDegraded
    | FallbackNotice
    | TextDeltaEvent
    | ReasoningDeltaEvent
    | ImageOutputEvent
    | ToolCallEvent
    | ToolResultEvent
    | ContextSnapshotEvent
    | TurnCompleted
    | TurnAborted
)
