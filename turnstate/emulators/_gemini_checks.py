"""The Gemini Interactions emulator's request checks: the refusal it raises (status and
Interactions-style error body), an unknown previous interaction, the input steps and the
function tools of a body."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from turnstate.emulators._base import RefusedRequest
from turnstate.emulators._gemini_wire import SERVER_STEP_FIELDS, STEP_TYPES, error_body


class ApiError(RefusedRequest):
    """A request the API refuses: ``status`` and the error body."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(status, error_body(code, message), message)


def _not_found(interaction_id: str) -> ApiError:
    message = f"Previous interaction with id '{interaction_id}' was not found or has expired."
    return ApiError(404, "not_found", message)


def _input_steps(raw: Any) -> list[Mapping[str, Any]]:
    """``input`` as steps: a string or a list of content parts is one ``user_input``."""
    if isinstance(raw, str):
        return [{"type": "user_input", "content": [{"type": "text", "text": raw}]}]
    if not isinstance(raw, list) or not raw:
        raise ApiError(400, "invalid_argument", "input is required.")
    if all(isinstance(s, Mapping) and s.get("type") == "text" for s in raw):
        return [{"type": "user_input", "content": list(raw)}]
    for step in raw:
        kind = step.get("type") if isinstance(step, Mapping) else None
        if kind not in STEP_TYPES:
            raise ApiError(400, "invalid_argument", f"Invalid step type '{kind}' in input.")
        missing = [f for f in SERVER_STEP_FIELDS.get(str(kind), ()) if f not in step]
        if missing:
            raise ApiError(400, "invalid_argument",
                           f"Step of type '{kind}' is missing required field '{missing[0]}'.")
    return list(raw)


def _tools(raw: Any) -> dict[str, Mapping[str, Any]]:
    tools: dict[str, Mapping[str, Any]] = {}
    for tool in raw if isinstance(raw, list) else []:
        if not isinstance(tool, Mapping) or tool.get("type") != "function" or not isinstance(
            tool.get("name"), str
        ):
            raise ApiError(400, "invalid_argument",
                           "Each function tool needs \"type\": \"function\" and a name.")
        parameters = tool.get("parameters")
        tools[tool["name"]] = parameters if isinstance(parameters, Mapping) else {}
    return tools
