"""Hostile provider behaviour, per wire protocol, for the fault tests.

Each provider gets its own spelling of the same faults: an HTTP error body, an in-stream
error event (``overloaded`` is the transient one), and the event a stream is cut before.
``MSG`` in a template is replaced by the message text (which may echo credentials).
"""

from __future__ import annotations

import json
from typing import Any

PROVIDERS = ("openai", "gemini", "openai-compatible", "deepseek", "anthropic")
MODELS = {"openai": "gpt-4o", "gemini": "gemini-2.5-flash", "openai-compatible": "gpt-4o-mini",
          "deepseek": "deepseek-chat", "anthropic": "claude-sonnet-4-5"}
DURABLE = {"openai", "gemini"}


def error_body(provider: str, message: str, kind: str = "invalid_request_error") -> Any:
    """An HTTP error body as ``provider`` sends one."""
    if provider == "anthropic":
        return {"type": "error", "error": {"type": kind, "message": message}}
    if provider == "gemini":
        return {"error": {"code": "invalid_argument", "message": message}}
    return {"error": {"message": message, "type": kind, "code": None, "param": None}}


def stream_error(provider: str, message: str, *, overloaded: bool = False) -> str:
    """An SSE frame carrying an in-stream error, as ``provider`` sends one."""
    if provider == "anthropic":
        kind = "overloaded_error" if overloaded else "invalid_request_error"
        return _frame("error", {"type": "error", "error": {"type": kind, "message": message}})
    if provider == "openai":
        code = "server_overloaded" if overloaded else "invalid_prompt"
        return _frame("error", {"type": "error", "sequence_number": 1, "code": code,
                                "message": message, "param": None})
    if provider == "gemini":
        code = "overloaded" if overloaded else "invalid_argument"
        return _frame("error", {"error": {"message": message, "code": code},
                                "event_type": "error"})
    kind = "overloaded" if overloaded else "invalid_request_error"
    return _frame(None, {"error": {"message": message, "type": kind, "code": kind,
                                   "param": None}})


def _frame(name: str | None, data: Any) -> str:
    head = f"event: {name}\n" if name else ""
    return f"{head}data: {json.dumps(data)}\n\n"


GARBAGE_FRAME = 'data: {"broken": MSG, [[[\n\n'
"""A frame whose data is not JSON (``MSG`` still replaced)."""

HTML_PAGE = "<html><head><title>502 Bad Gateway</title></head><body>MSG</body></html>"
