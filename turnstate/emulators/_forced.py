"""A request's ``tool_choice`` obeyed by the scripted model, as the real APIs document it,
and the scripted model's calls (``ScriptedCall``, ``example_arguments``: here so that
``_conversation_model`` imports this module, not the other way round).

``none``: the model answers in text, whatever its script said (OpenAI "the model will not
call any tool"; Anthropic ``none``; Gemini ``none``). ``required`` (Anthropic ``any``,
Gemini ``any``): it calls at least one tool: the scripted calls when there are some, else
the first tool the request offers. A tool's name (OpenAI's ``{"type": "function", ...}``,
Anthropic's ``{"type": "tool", "name"}``, Gemini's ``allowed_tools`` with one tool): it
calls that tool, and only that one (the scripted calls of it, else one with example
arguments). ``auto``, an absent choice or a name the request does not offer leave the
reply as it is.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from turnstate.core._json import JsonObject, compact_json

NO_TOOL_TEXT = "I will answer without calling a tool."
"""The text of a reply whose script called tools under ``tool_choice`` ``none`` and said
nothing else."""


@attrs.frozen(kw_only=True)
class ScriptedCall:
    name: str
    arguments: str


def example_arguments(schema: Mapping[str, Any] | None) -> JsonObject:
    """Deterministic arguments that satisfy a simple JSON schema's required properties."""
    properties = (schema or {}).get("properties") or {}
    out: JsonObject = {}
    for key, prop in properties.items():
        out[key] = _example_value(prop if isinstance(prop, Mapping) else {}, key)
    return out


def _example_value(prop: Mapping[str, Any], key: str) -> Any:
    if prop.get("enum"):
        return prop["enum"][0]
    kind = prop.get("type")
    if kind == "integer":
        return 1
    if kind == "number":
        return 1.5
    if kind == "boolean":
        return True
    if kind == "array":
        return []
    if kind == "object":
        return example_arguments(prop)
    return f"{key}-value"


def forced_calls(calls: tuple[ScriptedCall, ...], tools: Mapping[str, Mapping[str, Any]],
                 choice: Any) -> tuple[ScriptedCall, ...] | None:
    """The calls a reply must make under the request's ``choice`` (``emulators._settings``'
    neutral value: ``auto`` / ``none`` / ``required`` / a tool's name), given the calls
    its script made: ``()`` for none, None to leave the reply as it is."""
    if choice is None or choice == "auto" or not isinstance(choice, str):
        return None
    if choice == "none":
        return () if calls else None
    if not tools:
        return None
    if choice == "required":
        if calls:
            return calls
        name = next(iter(tools))
    elif choice in tools:
        name = choice
    else:
        return None  # a name not offered: the real APIs refuse the request
    return tuple(c for c in calls if c.name == name) or (ScriptedCall(
        name=name, arguments=compact_json(example_arguments(tools[name]))),)
