"""Tool calls some models wrap (``multi_tool_use.parallel``), unwrapped."""

from __future__ import annotations

import json
from typing import Any

import attrs

from turnstate.core._conversation import ToolCallPart
from turnstate.core._errors import (
    ProviderProtocolError,
)
from turnstate.core._json import compact_json
from turnstate.providers._frames import text_of

PARALLEL_WRAPPER = "multi_tool_use.parallel"
"""A wrapper call some OpenAI models emit instead of parallel calls; never a real tool."""


def unwrap_parallel(provider: str, call: ToolCallPart) -> tuple[ToolCallPart, ...]:
    """``call`` itself, or the calls a ``multi_tool_use.parallel`` wrapper holds.

    The wrapper's arguments are ``{"tool_uses": [{"recipient_name": "functions.NAME",
    "parameters": {...}}, ...]}``; call ``n`` gets the id ``{wrapper id}_{n}``.

    Raises:
        ProviderProtocolError: the wrapper's arguments are not that shape.
    """
    if call.name != PARALLEL_WRAPPER:
        return (call,)
    try:
        value = json.loads(call.arguments)
    except ValueError:
        value = None
    uses = value.get("tool_uses") if isinstance(value, dict) else None
    if not isinstance(uses, list) or not uses:
        msg = f"{PARALLEL_WRAPPER} call {call.call_id} has no tool_uses list"
        raise ProviderProtocolError(provider, msg)
    return tuple(_unwrapped(provider, call, n, use) for n, use in enumerate(uses))


def _unwrapped(provider: str, call: ToolCallPart, n: int, use: Any) -> ToolCallPart:
    name = text_of(use.get("recipient_name")) if isinstance(use, dict) else None
    parameters = use.get("parameters", {}) if isinstance(use, dict) else None
    if not name or not isinstance(parameters, dict):
        msg = f"{PARALLEL_WRAPPER} call {call.call_id}: tool use {n} has no name or parameters"
        raise ProviderProtocolError(provider, msg)
    return attrs.evolve(call, call_id=f"{call.call_id}_{n}", name=name.removeprefix("functions."),
                        arguments=compact_json(parameters))
