"""Gemini Interactions steps the parser keeps as they come: server-tool steps (merged
from their deltas, kept opaque) and the interaction's usage (shared by the stream
parser and the body reader, ``_parser``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from turnstate.core._conversation import Usage
from turnstate.providers._frames import int_field

SERVER_STEP_TYPES = frozenset({
    "google_search_call", "google_search_result", "code_execution_call",
    "code_execution_result", "url_context_call", "url_context_result", "google_maps_call",
    "google_maps_result", "file_search_call", "file_search_result", "mcp_server_tool_call",
    "mcp_server_tool_result", "retrieval_call", "retrieval_result", "tool_search_call",
    "tool_search_result", "processing_call", "processing_result",
})
"""Server-side tool steps (google-genai's ``StepDeltaData`` variants of the same names):
a step starts with little more than its id, type and ``signature: ""``; its
``arguments`` (calls), ``result`` and ``is_error`` (results) and its signature arrive in
``step.delta`` frames of the same type."""

SERVER_CALL_STEPS = frozenset(kind for kind in SERVER_STEP_TYPES if kind.endswith("_call"))
"""The server-side tool calls (a Google Search grounding, a code execution, ...): billed
per query or call beside the tokens."""


def merge_step_delta(step: dict[str, Any], delta: Mapping[str, Any]) -> None:
    """Fold a server-tool step's delta into the step: ``signature`` is concatenated
    (as thought signatures are), list fields (``result``) extended, objects
    (``arguments``) merged, anything else replaced; ``type`` is the step's own."""
    for key, value in delta.items():
        if key == "type":
            continue
        held = step.get(key)
        if key == "signature" and isinstance(value, str):
            step[key] = (held if isinstance(held, str) else "") + value
        elif isinstance(value, list) and isinstance(held, list):
            step[key] = [*held, *value]
        elif isinstance(value, Mapping) and isinstance(held, Mapping):
            step[key] = {**held, **value}
        else:
            step[key] = value


def usage_of(usage: Any) -> Usage:
    """``total_*`` usage in engine terms.

    Input counts everything the model read (prompt and tool-use prompt tokens);
    output counts everything it wrote, thoughts included (as OpenAI's
    ``output_tokens`` does), with the thoughts also reported as reasoning tokens.
    """
    if not isinstance(usage, Mapping):
        return Usage()
    thoughts = int_field(usage.get("total_thought_tokens"))
    return Usage(
        input_tokens=int_field(usage.get("total_input_tokens"))
        + int_field(usage.get("total_tool_use_tokens")),
        output_tokens=int_field(usage.get("total_output_tokens")) + thoughts,
        cached_input_tokens=int_field(usage.get("total_cached_tokens")),
        reasoning_tokens=thoughts,
    )
