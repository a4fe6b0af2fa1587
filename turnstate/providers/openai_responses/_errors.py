"""OpenAI Responses error classification, for HTTP error bodies and in-stream errors.

The cursor cases come first (providers-wire.md 1.7, observed payloads):

* ``previous_response_not_found``, or an ``invalid_request_error`` naming
  ``previous_response_id`` whose message says "not found": the cursor is gone
  (never stored, deleted or expired), ``cursor_expired``.
* any other complaint about ``previous_response_id`` (the "Invalid
  `previous_response_id`." variant, an id that does not begin with ``resp``):
  ``cursor_invalid``.

"No tool output found for function call ..." (and its reverse, an output without its
call) means turnstate sent a conversation that breaks the pairing rule: a bug, logged
at ERROR and fatal. ``context_length_exceeded`` (the input, on a cursor the whole stored
conversation, is longer than the model's window: "Your input exceeds the context window
of this model.") is ``ContextLengthExceeded``. Everything else goes through
``status_error`` for HTTP answers; an in-stream error has no status, so its code
decides: rate limits and server errors are transient, the rest (``insufficient_quota``
included) fatal.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from turnstate.core._errors import ProviderError
from turnstate.providers._errors import StreamCodes, classify_durable, error_fields, quota_code
from turnstate.providers._frames import error_object, text_of

PROVIDER = "openai"

CURSOR_PARAM = "previous_response_id"
CONTEXT_LENGTH_CODE = "context_length_exceeded"
_NOT_FOUND = re.compile(r"not\s+found", re.IGNORECASE)
_PREVIOUS_RESPONSE = re.compile(r"previous[ _]response", re.IGNORECASE)
STREAM_CODES = StreamCodes(
    provider=PROVIDER,
    rate_limited=frozenset({"rate_limit_exceeded", "rate_limit_error"}),
    transient=frozenset({"server_error", "internal_error", "server_overloaded", "overloaded",
                         "timeout", "service_unavailable"}),
)


def classify_body(status: int, headers: Mapping[str, str], body: bytes) -> ProviderError:
    """Classify a non-2xx answer of ``POST /responses`` (or a 2xx one that holds an
    error object instead of the stream, by its code)."""
    return classify_fields(status, headers, error_fields(body))


def classify_fields(
    status: int | None, headers: Mapping[str, str], fields: Mapping[str, Any]
) -> ProviderError:
    """Classify an ``error`` object (``message``, ``type``, ``code``, ``param``).

    ``status`` is None for errors that arrived inside the stream.
    """
    message = text_of(fields.get("message")) or "(no message)"
    code = text_of(fields.get("code"))
    reason = cursor_reason(message, code, text_of(fields.get("param")))
    exceeded = code == CONTEXT_LENGTH_CODE
    code = quota_code(fields) or code or text_of(fields.get("type"))
    return classify_durable(STREAM_CODES, status, headers, message=message,
                            code=code, cursor_reason=reason, context_exceeded=exceeded)


def cursor_reason(message: str, code: str | None, param: str | None) -> str | None:
    """``cursor_expired`` / ``cursor_invalid`` when the error is about the cursor."""
    if code == "previous_response_not_found":
        return "cursor_expired"
    about_cursor = (
        param == CURSOR_PARAM
        or CURSOR_PARAM in message
        or _PREVIOUS_RESPONSE.search(message) is not None
    )
    if not about_cursor:
        return None
    if _NOT_FOUND.search(message):
        return "cursor_expired"
    return "cursor_invalid"


def stream_error_event(frame: Mapping[str, Any]) -> ProviderError:
    """The ``error`` event in both recorded forms: flat (``code``, ``message``,
    ``param`` at the top, as the SDK types it) or nested under ``error``."""
    nested = error_object(frame.get("error"))  # a relay's text too
    return classify_fields(None, {}, nested if nested is not None else frame)
