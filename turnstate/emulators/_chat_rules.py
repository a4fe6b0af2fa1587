"""The request rules the Chat Completions emulators share, with OpenAI's error bodies.

``ApiError`` is OpenAI's error shape (``{"error": {message, type, param, code}}``); the
checks return one for a request the API refuses, or None.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs
from aiohttp import web

from turnstate.core._json import compact_json
from turnstate.emulators._chat_dialects import EXTRA_FORBIDDEN, REFUSED_FIELD, Dialect

UNANSWERED_CALLS = (
    "An assistant message with 'tool_calls' must be followed by tool messages responding "
    "to each 'tool_call_id'. The following tool_call_ids did not have response messages: "
)
ORPHAN_TOOL = (
    "Messages with role 'tool' must be a response to a preceeding message with 'tool_calls'"
)


@attrs.frozen(kw_only=True)
class ApiError:
    """An OpenAI-shaped error response: ``{"error": {message, type, param, code}}``."""

    status: int
    message: str
    type: str = "invalid_request_error"
    param: str | None = None
    code: str | None = None

    def response(self) -> web.Response:
        body = {"error": {"message": self.message, "type": self.type, "param": self.param,
                          "code": self.code}}
        return web.Response(status=self.status, text=compact_json(body),
                            content_type="application/json")


def check_shape(body: Any) -> ApiError | None:
    if not isinstance(body, dict):
        return ApiError(status=400, message="We could not parse the JSON body of your request.")
    if not isinstance(body.get("model"), str) or not body["model"]:
        return ApiError(status=400, message="you must provide a model parameter")
    messages = body.get("messages")
    if not isinstance(messages, list):
        return ApiError(status=400, message="Missing required parameter: 'messages'.",
                        param="messages", code="missing_required_parameter")
    if not messages or not all(isinstance(m, dict) for m in messages):
        return ApiError(status=400, param="messages", code="empty_array",
                        message="Invalid 'messages': empty array. Expected an array with "
                                "minimum length 1, but got an empty array instead.")
    return None


def call_ids_of(message: Mapping[str, Any]) -> list[str]:
    calls = message.get("tool_calls")
    if message.get("role") != "assistant" or not isinstance(calls, list):
        return []
    return [str(c.get("id")) for c in calls if isinstance(c, dict)]


def check_call_ids(messages: Sequence[Mapping[str, Any]],
                   max_length: int | None = None) -> ApiError | None:
    """No empty ``tool_calls[].id`` or ``tool_call_id`` (a client must make its own id
    for a call a server streamed without one, and send the same one with the result),
    and none past ``max_length`` characters when there is a limit (OpenAI's is 40)."""
    for index, message in enumerate(messages):
        calls = message.get("tool_calls") if message.get("role") == "assistant" else None
        named = [(f"messages[{index}].tool_calls[{n}].id", call.get("id"))
                 for n, call in enumerate(calls if isinstance(calls, list) else ())
                 if isinstance(call, dict)]
        if message.get("role") == "tool":
            named.append((f"messages[{index}].tool_call_id", message.get("tool_call_id")))
        for param, value in named:
            if not isinstance(value, str) or not value:
                return ApiError(status=400, param=param, code="empty_string",
                                message=f"Invalid '{param}': empty string. Expected a string "
                                        "with minimum length 1, but got an empty string "
                                        "instead.")
            if max_length is not None and len(value) > max_length:
                return ApiError(status=400, param=param, code="string_above_max_length",
                                message=f"Invalid '{param}': string too long. Expected a "
                                        f"string with maximum length {max_length}, but got "
                                        f"a string with length {len(value)} instead.")
    return None


def check_refused_fields(messages: Sequence[Mapping[str, Any]],
                         dialect: Dialect) -> ApiError | None:
    """An assistant message carrying a key the dialect's server rejects."""
    for index, message in enumerate(messages):
        for field in dialect.refused_fields:
            if message.get("role") == "assistant" and field in message:
                return ApiError(status=400, message=REFUSED_FIELD.format(index, field))
    return None


def check_request_fields(body: Mapping[str, Any], dialect: Dialect) -> ApiError | None:
    """A request key the dialect's server rejects (vLLM's 400, ``type`` BadRequestError)."""
    for field in dialect.refused_request_fields:
        if field in body:
            message = EXTRA_FORBIDDEN.format(field, repr(body[field]))
            return ApiError(status=400, message=message, type="BadRequestError")
    return None


def check_tool_pairing(messages: Sequence[Mapping[str, Any]]) -> ApiError | None:
    """Calls answered by the ``tool`` messages right after them; no orphan results.

    ``param`` names the assistant message whose calls went unanswered, or the orphan.
    """
    pending: list[str] = []
    answerable: set[str] = set()
    origin = 0
    for index, message in enumerate(messages):
        if message.get("role") == "tool":
            call_id = message.get("tool_call_id")
            if call_id not in answerable:
                return ApiError(status=400, message=ORPHAN_TOOL, param=f"messages.[{index}].role")
            pending = [c for c in pending if c != call_id]
            continue
        if pending:
            break
        pending, origin = call_ids_of(message), index
        answerable = set(pending)
    if pending:
        return ApiError(status=400, message=UNANSWERED_CALLS + ", ".join(pending),
                        param=f"messages.[{origin}].role")
    return None
