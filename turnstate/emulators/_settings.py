"""The generation settings a request carries, read from any of the five wire formats.

The emulators hand them to the scripted model, which obeys ``max_output_tokens`` (an
answer longer than that many words stops at the limit, finish reason ``length``) and
echoes them all for ``[[settings]]``, so a test sees what reached the wire in the
neutral names of ``GenerationSettings``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from turnstate.core._json import JsonObject


def _first(*values: Any) -> Any:
    return next((v for v in values if v is not None), None)


def _object(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _tool_choice(value: Any) -> str | None:
    """``auto`` / ``none`` / ``required`` or the tool's name, from any wire form."""
    if isinstance(value, str):
        return "required" if value == "any" else value
    choice = _object(value)
    named = _first(choice.get("name"), _object(choice.get("function")).get("name"))
    allowed = _object(choice.get("allowed_tools")).get("tools")
    if isinstance(allowed, list) and allowed:
        named = allowed[0]
    if named is not None:
        return str(named)
    kind = choice.get("type")
    return "required" if kind == "any" else kind if isinstance(kind, str) else None


def _parallel(body: Mapping[str, Any]) -> bool | None:
    if isinstance(body.get("parallel_tool_calls"), bool):
        return bool(body["parallel_tool_calls"])
    disabled = _object(body.get("tool_choice")).get("disable_parallel_tool_use")
    return not disabled if isinstance(disabled, bool) else None


def _response_format(body: Mapping[str, Any]) -> JsonObject | None:
    """``ResponseFormat.as_json`` of the format a body asks for (Responses ``text.format``,
    Chat Completions' or Gemini's ``response_format``, Anthropic's ``output_config.format``);
    a ``name`` or ``strict`` the wire has no place for reads as its default; a plain
    ``text`` format (not Gemini's with ``mime_type`` ``application/json``) is None."""
    fmt = (_object(_object(body.get("text")).get("format"))
           or _object(_object(body.get("output_config")).get("format"))
           or _object(body.get("response_format")))
    if not fmt or (fmt.get("type") == "text" and fmt.get("mime_type") != "application/json"):
        return None  # plain text (Responses' and Chat Completions' default format)
    nested = _object(fmt.get("json_schema"))
    return {"schema": _first(fmt.get("schema"), nested.get("schema")),
            "name": _first(fmt.get("name"), nested.get("name"), "response"),
            "strict": _first(fmt.get("strict"), nested.get("strict"), True)}


def wire_settings(body: Mapping[str, Any]) -> JsonObject:
    """The settings in ``body`` (Responses, Interactions, Chat Completions, DeepSeek or
    Anthropic), by their ``GenerationSettings`` names; absent ones left out."""
    config = _object(body.get("generation_config"))
    found = {
        "max_output_tokens": _first(body.get("max_output_tokens"),
                                    body.get("max_completion_tokens"), body.get("max_tokens"),
                                    config.get("max_output_tokens")),
        "temperature": _first(body.get("temperature"), config.get("temperature")),
        "top_p": _first(body.get("top_p"), config.get("top_p")),
        "reasoning_effort": _first(_object(body.get("reasoning")).get("effort"),
                                   body.get("reasoning_effort"), config.get("thinking_level")),
        "reasoning_budget_tokens": _object(body.get("thinking")).get("budget_tokens"),
        "tool_choice": _tool_choice(_first(body.get("tool_choice"),
                                           config.get("tool_choice"))),
        "stop": _first(body.get("stop"), body.get("stop_sequences"),
                       config.get("stop_sequences")),
        "parallel_tool_calls": _parallel(body),
        "metadata": body.get("metadata"),
        "seed": _first(body.get("seed"), config.get("seed")),
        "response_format": _response_format(body),
    }
    return {key: value for key, value in found.items() if value is not None}
