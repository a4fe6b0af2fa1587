"""``GenerationSettings`` in each wire format (pure functions, one per protocol).

A field that is None (or empty) is left out, so the adapter's own default applies.
``tool_choice`` and ``parallel_tool_calls`` go only with a request that offers tools
(the APIs refuse them otherwise). The registry has checked the settings against the
provider and the model before the turn started (``core._generation.check_settings``).

* OpenAI Responses: ``max_output_tokens``, ``temperature``, ``top_p``,
  ``reasoning.effort``, ``tool_choice`` (``{"type": "function", "name"}`` for one tool),
  ``parallel_tool_calls``, ``metadata``, ``text.format`` (``json_schema`` / ``json_object``).
* Gemini Interactions: ``generation_config`` (``max_output_tokens``, ``temperature``,
  ``top_p``, ``thinking_level``, ``stop_sequences``, ``seed``, ``tool_choice``: ``auto``
  / ``none`` / ``any``, or ``{"allowed_tools": {"mode": "any", "tools": [name]}}``), and
  beside it ``response_format`` (``{"type": "text", "mime_type": "application/json",
  "schema"?}``).
* Chat Completions: ``max_completion_tokens``, ``temperature``, ``top_p``,
  ``reasoning_effort``, ``tool_choice`` (``{"type": "function", "function": {"name"}}``),
  ``stop``, ``parallel_tool_calls``, ``seed``, ``response_format`` (``json_schema`` /
  ``json_object``); DeepSeek the same with ``max_tokens`` (and ``json_object`` only).
* Anthropic Messages: ``max_tokens``, ``temperature``, ``top_p``, ``thinking``
  (``budget_tokens``), ``tool_choice`` (``auto`` / ``none`` / ``any`` / ``tool`` with its
  name, ``disable_parallel_tool_use``), ``stop_sequences``, ``metadata`` (``user_id``),
  ``output_config.format`` (``json_schema``).
"""

from __future__ import annotations

from typing import Any

from turnstate.core._generation import GenerationSettings
from turnstate.core._json import JsonObject
from turnstate.core._response_format import ResponseFormat


def _sampling(settings: GenerationSettings) -> JsonObject:
    out: JsonObject = {}
    if settings.temperature is not None:
        out["temperature"] = settings.temperature
    if settings.top_p is not None:
        out["top_p"] = settings.top_p
    return out


def _openai_format(fmt: ResponseFormat) -> JsonObject:
    """OpenAI's format object, flat (Responses ``text.format``) or nested (Chat
    Completions ``response_format``, whose schema sits in ``json_schema``)."""
    if fmt.schema is None:
        return {"type": "json_object"}
    return {"type": "json_schema", "name": fmt.name, "schema": fmt.schema_json(),
            "strict": fmt.strict}


def _named(choice: str | None) -> str | None:
    """The tool a ``tool_choice`` names, or None for a mode."""
    return choice if choice not in (None, "auto", "none", "required") else None


def responses_fields(settings: GenerationSettings, *, has_tools: bool,
                     reasoning: JsonObject | None) -> JsonObject:
    """OpenAI Responses fields; ``reasoning`` is the adapter's own object (kept, with the
    turn's effort over its ``effort``)."""
    out: JsonObject = {}
    if settings.max_output_tokens is not None:
        out["max_output_tokens"] = settings.max_output_tokens
    out.update(_sampling(settings))
    if settings.reasoning_effort is not None:
        out["reasoning"] = {**(reasoning or {}), "effort": settings.reasoning_effort.value}
    if has_tools and settings.tool_choice is not None:
        name = _named(settings.tool_choice)
        out["tool_choice"] = {"type": "function", "name": name} if name \
            else settings.tool_choice
    if has_tools and settings.parallel_tool_calls is not None:
        out["parallel_tool_calls"] = settings.parallel_tool_calls
    if settings.metadata:
        out["metadata"] = dict(settings.metadata)
    if settings.response_format is not None:
        out["text"] = {"format": _openai_format(settings.response_format)}
    return out


def gemini_response_format(settings: GenerationSettings) -> JsonObject | None:
    """Gemini Interactions' top-level ``response_format``, or None."""
    fmt = settings.response_format
    if fmt is None:
        return None
    out: JsonObject = {"type": "text", "mime_type": "application/json"}
    if fmt.schema is not None:
        out["schema"] = fmt.schema_json()
    return out


def gemini_generation_config(settings: GenerationSettings, *, has_tools: bool,
                             base: JsonObject | None) -> JsonObject | None:
    """The ``generation_config`` object: the adapter's own, with the turn's fields over it."""
    out: dict[str, Any] = dict(base or {})
    if settings.max_output_tokens is not None:
        out["max_output_tokens"] = settings.max_output_tokens
    out.update(_sampling(settings))
    if settings.reasoning_effort is not None:
        out["thinking_level"] = settings.reasoning_effort.value
    if settings.stop:
        out["stop_sequences"] = list(settings.stop)
    if settings.seed is not None:
        out["seed"] = settings.seed
    if has_tools and settings.tool_choice is not None:
        name = _named(settings.tool_choice)
        out["tool_choice"] = {"allowed_tools": {"mode": "any", "tools": [name]}} if name \
            else "any" if settings.tool_choice == "required" else settings.tool_choice
    return out or None


def chat_fields(settings: GenerationSettings, *, has_tools: bool,
                max_tokens_field: str = "max_completion_tokens") -> JsonObject:
    """Chat Completions fields (DeepSeek names the limit ``max_tokens``)."""
    out: JsonObject = {}
    if settings.max_output_tokens is not None:
        out[max_tokens_field] = settings.max_output_tokens
    out.update(_sampling(settings))
    if settings.reasoning_effort is not None:
        out["reasoning_effort"] = settings.reasoning_effort.value
    if has_tools and settings.tool_choice is not None:
        name = _named(settings.tool_choice)
        out["tool_choice"] = {"type": "function", "function": {"name": name}} if name \
            else settings.tool_choice
    if settings.stop:
        out["stop"] = list(settings.stop)
    if has_tools and settings.parallel_tool_calls is not None:
        out["parallel_tool_calls"] = settings.parallel_tool_calls
    if settings.seed is not None:
        out["seed"] = settings.seed
    fmt = settings.response_format
    if fmt is not None:
        wire = _openai_format(fmt)
        out["response_format"] = wire if fmt.schema is None else {
            "type": "json_schema", "json_schema": {k: v for k, v in wire.items() if k != "type"}}
    return out


def anthropic_tool_choice(settings: GenerationSettings) -> JsonObject | None:
    """``tool_choice`` for a request with tools, or None to leave Anthropic's default."""
    choice, parallel = settings.tool_choice, settings.parallel_tool_calls
    if choice is None and parallel is None:
        return None
    name = _named(choice)
    kinds = {None: "auto", "auto": "auto", "none": "none", "required": "any"}
    out: JsonObject = {"type": "tool", "name": name} if name else {"type": kinds[choice]}
    if parallel is not None and out["type"] != "none":
        out["disable_parallel_tool_use"] = not parallel
    return out


def anthropic_fields(settings: GenerationSettings, *, has_tools: bool) -> JsonObject:
    """Anthropic fields besides ``max_tokens`` and ``thinking`` (the adapter writes those,
    with its own defaults)."""
    out: JsonObject = _sampling(settings)
    if settings.stop:
        out["stop_sequences"] = list(settings.stop)
    choice = anthropic_tool_choice(settings) if has_tools else None
    if choice is not None:
        out["tool_choice"] = choice
    if settings.metadata:  # only user_id: the registry refused any other key
        out["metadata"] = dict(settings.metadata)
    if settings.response_format is not None:  # with a schema: the registry refused none
        out["output_config"] = {"format": {"type": "json_schema",
                                           "schema": settings.response_format.schema_json()}}
    return out
