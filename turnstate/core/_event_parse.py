"""``event_json``'s inverse: a turn's event back from its JSON line (issue: embedder).

An embedder that keeps a turn's events (its own log, a queue, a Python client of an SSE
stream) reads them back as the typed, frozen events ``run_turn`` yields: ``parse_event
(event_json(event)) == event`` for every event (tested for each type), costs as the exact
Decimals they were. Anything else, malformed JSON, an unknown ``type``, a missing or
mistyped field, is ``EventMalformed``: one typed error, never cattrs' or json's own.
"""

from __future__ import annotations

import binascii
import json
from collections.abc import Mapping
from decimal import Decimal, InvalidOperation
from typing import Any

import cattrs

from turnstate.core._context import ContextSnapshot
from turnstate.core._conversation import Usage
from turnstate.core._convert import register_camel, strict_converter
from turnstate.core._cost import TurnCost
from turnstate.core._errors import EventMalformed
from turnstate.core._events import (
    ContextSnapshotEvent,
    ContinuationDegraded,
    FallbackNotice,
    ImageOutputEvent,
    ProviderFailure,
    ReasoningDeltaEvent,
    StateChanged,
    TextDeltaEvent,
    ToolCallEvent,
    ToolResultEvent,
    TurnAborted,
    TurnCompleted,
    TurnEvent,
    TurnStats,
)
from turnstate.core._media import decoded_base64
from turnstate.core._path import PathStep

_EVENTS: dict[str, type[Any]] = {
    "state_changed": StateChanged, "continuation_degraded": ContinuationDegraded,
    "fallback_notice": FallbackNotice, "text_delta": TextDeltaEvent,
    "reasoning_delta": ReasoningDeltaEvent, "image_output": ImageOutputEvent,
    "tool_call": ToolCallEvent,
    "tool_result": ToolResultEvent, "context_snapshot": ContextSnapshotEvent,
    "turn_completed": TurnCompleted, "turn_aborted": TurnAborted}


def _amount(value: Any) -> Decimal:
    if type(value) is not str:
        msg = f"expected a decimal string, got {type(value).__name__}"
        raise TypeError(msg)
    amount = Decimal(value)  # InvalidOperation (a ValueError's kin) for anything else
    if not amount.is_finite():
        msg = f"not a finite amount: {value!r}"
        raise ValueError(msg)
    return amount


def _cost(value: Any, _: Any) -> TurnCost:
    """``TurnCost.as_json``'s object; its ``total`` must be the parts' sum."""
    if not isinstance(value, dict):
        msg = f"expected an object, got {type(value).__name__}"
        raise TypeError(msg)
    cost = TurnCost(input=_amount(value["input"]),
                    cached_input=_amount(value["cachedInput"]),
                    cache_write=_amount(value["cacheWrite"]),
                    output=_amount(value["output"]))
    if "total" in value and _amount(value["total"]) != cost.total:
        msg = f"total {value['total']} is not the sum of its parts ({cost.total})"
        raise ValueError(msg)
    return cost


def _bytes(value: Any, _: Any) -> bytes:
    """An ``image_output``'s base64 ``data``."""
    if type(value) is not str:
        msg = f"expected base64 text, got {type(value).__name__}"
        raise TypeError(msg)
    try:
        return decoded_base64(value)
    except binascii.Error as exc:
        raise ValueError(str(exc)) from None


def _converter() -> cattrs.Converter:
    converter = strict_converter()
    converter.register_structure_hook(TurnCost, _cost)
    converter.register_structure_hook(bytes, _bytes)
    for cls in (PathStep, Usage, ContextSnapshot, TurnStats, ProviderFailure,
                *_EVENTS.values()):
        register_camel(converter, cls)
    return converter


_CONVERTER = _converter()


def parse_event(raw: str | bytes | Mapping[str, Any]) -> TurnEvent:
    """The event ``event_json`` wrote (its text, bytes, or the object it decodes to).

    Raises:
        EventMalformed: not JSON, not an object, an unknown ``type``, or a field missing
            or of the wrong type (``detail`` says which).
    """
    try:
        data = json.loads(raw) if isinstance(raw, str | bytes) else raw
    except (ValueError, RecursionError) as exc:
        msg = f"not JSON: {exc}"
        raise EventMalformed(msg) from None
    if not isinstance(data, Mapping):
        msg = f"expected a JSON object, got {type(data).__name__}"
        raise EventMalformed(msg)
    kind = data.get("type")
    cls = _EVENTS.get(kind) if isinstance(kind, str) else None
    if cls is None:
        msg = f"unknown event type {kind!r}"
        raise EventMalformed(msg)
    try:
        event: TurnEvent = _CONVERTER.structure(dict(data), cls)
    except (cattrs.BaseValidationError, KeyError, TypeError, ValueError,
            InvalidOperation, RecursionError) as exc:
        msg = f"{kind}: {exc!r}"
        raise EventMalformed(msg) from None
    return event
