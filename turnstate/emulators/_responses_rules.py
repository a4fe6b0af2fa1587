"""The Responses emulator's request rules: input items, tools and
``context_management``, refused with the real API's statuses and error bodies."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from turnstate.core._json import JsonObject
from turnstate.emulators._base import RefusedRequest
from turnstate.emulators._chain import ChainView
from turnstate.emulators._openai_limits import (
    RESPONSES_JSON_WORD,
    image_problem,
    json_object_asked,
    message_texts,
    says_json,
)
from turnstate.emulators._responses_wire import error_body, item_type

INPUT_TYPES = frozenset({"message", "function_call", "function_call_output", "reasoning",
                         "compaction", "item_reference", "web_search_call"})


class ApiError(RefusedRequest):
    """A request the real API refuses: ``status`` and the real error body."""

    def __init__(self, status: int, body: JsonObject) -> None:
        super().__init__(status, body, body["error"]["message"])


def require(body: Mapping[str, Any], name: str, kind: type) -> None:
    if not isinstance(body.get(name), kind):
        message = f"Missing required parameter: '{name}'."
        raise ApiError(400, error_body(message, param=name, code="missing_required_parameter"))


MIN_OUTPUT_TOKENS = 16


def check_output_limit(body: Mapping[str, Any]) -> None:
    """``max_output_tokens`` below 16: the API's 400 (``integer_below_min_value``)."""
    limit = body.get("max_output_tokens")
    if type(limit) is int and limit < MIN_OUTPUT_TOKENS:
        message = (f"Invalid 'max_output_tokens': integer below minimum value. Expected a "
                   f"value >= {MIN_OUTPUT_TOKENS}, but got {limit} instead.")
        raise ApiError(400, error_body(message, param="max_output_tokens",
                                       code="integer_below_min_value"))


def input_items(body: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    raw = body.get("input")
    if isinstance(raw, str):
        return [{"type": "message", "role": "user", "content": raw}]
    if not isinstance(raw, list):
        require(body, "input", list)
    items: list[Mapping[str, Any]] = []
    for index, item in enumerate(raw or []):
        kind = item_type(item) if isinstance(item, Mapping) else "?"
        if kind not in INPUT_TYPES:
            message = (f"Invalid value: '{kind}'. Supported values are: "
                       + ", ".join(f"'{t}'" for t in sorted(INPUT_TYPES)) + ".")
            raise ApiError(400, error_body(message, param=f"input[{index}].type",
                                           code="invalid_value"))
        items.append(item)
    return items


def check_reasoning_item(index: int, item: Mapping[str, Any]) -> None:
    """``ResponseReasoningItemParam`` requires ``id`` and ``summary``."""
    for field in ("id", "summary"):
        if field not in item:
            message = f"Missing required parameter: 'input[{index}].{field}'."
            raise ApiError(400, error_body(message, param=f"input[{index}].{field}",
                                           code="missing_required_parameter"))


def latest_compaction(inputs: Sequence[Mapping[str, Any]]) -> int | None:
    """The index of the latest compaction input item (its payload checked), or None."""
    for index in range(len(inputs) - 1, -1, -1):
        if item_type(inputs[index]) != "compaction":
            continue
        payload = inputs[index].get("encrypted_content")
        if not isinstance(payload, str) or not payload:
            message = f"Missing required parameter: 'input[{index}].encrypted_content'."
            raise ApiError(400, error_body(message, param=f"input[{index}].encrypted_content",
                                           code="missing_required_parameter"))
        return index
    return None


def function_tools(raw: Any) -> dict[str, Mapping[str, Any]]:
    tools: dict[str, Mapping[str, Any]] = {}
    for index, tool in enumerate(raw if isinstance(raw, list) else []):
        if not isinstance(tool, Mapping) or not isinstance(tool.get("name"), str):
            message = f"Missing required parameter: 'tools[{index}].name'."
            raise ApiError(400, error_body(message, param=f"tools[{index}].name",
                                           code="missing_required_parameter"))
        parameters = tool.get("parameters")
        tools[tool["name"]] = parameters if isinstance(parameters, Mapping) else {}
    return tools


def compact_threshold(raw: Any) -> int | None:
    """``compact_threshold`` of a ``context_management`` list (None when absent or empty)."""
    if raw is None or raw == []:
        return None
    entry = raw[0] if isinstance(raw, list) else None
    threshold = entry.get("compact_threshold") if isinstance(entry, Mapping) else None
    valid = isinstance(entry, Mapping) and entry.get("type") == "compaction"
    if not valid or not isinstance(threshold, int) or threshold <= 0:
        message = ("Invalid type for 'context_management': expected a list of "
                   "{\"type\": \"compaction\", \"compact_threshold\": integer}.")
        raise ApiError(400, error_body(message, param="context_management",
                                       code="invalid_type"))
    return threshold


def check_openai_input(body: Mapping[str, Any], inputs: Sequence[Mapping[str, Any]],
                       prior: ChainView) -> None:
    """OpenAI's image limits over this request's input, and JSON mode's word over the
    messages of the conversation the model sees (``prior``, then ``inputs``; never
    ``instructions``): ``_openai_limits``."""
    problem = image_problem(list(inputs), "input")
    if problem is not None:
        raise ApiError(400, error_body(problem[1], param=problem[0]))
    text = body.get("text")
    if not json_object_asked(text.get("format") if isinstance(text, Mapping) else None):
        return
    said = (t for item in inputs if item_type(item) == "message"
            for t in message_texts(item.get("content")))
    before = (item.text for item in prior if item.kind in ("user", "assistant"))
    if not says_json(said) and not says_json(before):
        raise ApiError(400, error_body(RESPONSES_JSON_WORD, param="input"))
