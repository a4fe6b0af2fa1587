"""Gemini Interactions error classification (HTTP bodies and in-stream ``error`` events).

Error bodies are ``{"error": {"code": "<string>", "message": "..."}}``
(providers-wire.md 2.7); the classic ``{"error": {"code": 400, "message", "status":
"INVALID_ARGUMENT"}}`` shape is read too.

The reference leaves the cursor errors UNCONFIRMED. turnstate decides (and its
emulator sends exactly this):

* unknown, expired, deleted or never-stored ``previous_interaction_id``: HTTP 404
  ``not_found`` whose message names the interaction; also any error whose message
  says the previous interaction was not found or has expired (a 400 variant):
  ``cursor_expired``;
* a malformed id: HTTP 400 ``invalid_argument`` whose message names
  ``previous_interaction_id``: ``cursor_invalid``.

A 404 that does not mention an interaction (an unknown model, say) is fatal.

The reference documents no context-length error for Interactions (nor any server-side
compaction). turnstate reads the Gemini API's 400 ``invalid_argument`` "The input token
count (N) exceeds the maximum number of tokens allowed (M)." (and its in-stream
form) as ``ContextLengthExceeded``: on a cursor the stored conversation outgrew the window. Tool
pairing complaints are a turnstate bug, logged at ERROR and fatal. The rest is the
generic status classification; in-stream errors have no status, so their code decides.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from turnstate.core._errors import ProviderError, RateLimited
from turnstate.providers._errors import StreamCodes, classify_durable, error_fields
from turnstate.providers._frames import error_object, text_of

PROVIDER = "gemini"

CURSOR_PARAM = "previous_interaction_id"
_PREVIOUS = re.compile(r"previous[ _]interaction", re.IGNORECASE)
_INTERACTION = re.compile(r"interaction", re.IGNORECASE)
_GONE = re.compile(r"not\s+found|expired|does not exist|no longer", re.IGNORECASE)
_TOO_LONG = re.compile(
    r"token count.*exceeds the maximum|exceeds the maximum number of tokens"
    r"|exceeds the context window|context length exceeded", re.IGNORECASE)
NOT_FOUND_CODES = frozenset({"not_found", "NOT_FOUND", "404"})
STREAM_CODES = StreamCodes(
    provider=PROVIDER,
    rate_limited=frozenset({"resource_exhausted", "RESOURCE_EXHAUSTED", "rate_limit_exceeded"}),
    transient=frozenset({"internal", "INTERNAL", "unavailable", "UNAVAILABLE",
                         "gateway_timeout", "deadline_exceeded", "DEADLINE_EXCEEDED",
                         "overloaded"}),
)


def classify_body(status: int, headers: Mapping[str, str], body: bytes) -> ProviderError:
    """Classify a non-2xx answer of ``POST /interactions`` (or a 2xx one that holds an
    error object instead of the stream, by its code)."""
    return classify_fields(status, headers, error_fields(body))


def classify_fields(
    status: int | None, headers: Mapping[str, str], fields: Mapping[str, Any]
) -> ProviderError:
    """Classify an ``error`` object; ``status`` is None for in-stream errors."""
    message = text_of(fields.get("message")) or "(no message)"
    code = _code(fields)
    error = classify_durable(STREAM_CODES, status, headers, message=message, code=code,
                             cursor_reason=cursor_reason(status, message, code),
                             context_exceeded=context_exceeded(status, message))
    if isinstance(error, RateLimited) and error.retry_after is None:
        error.retry_after = retry_delay(fields.get("details"))
    return error


_DURATION = re.compile(r"([0-9]+(?:\.[0-9]+)?)s")
RETRY_INFO = "type.googleapis.com/google.rpc.RetryInfo"


def retry_delay(details: Any) -> float | None:
    """The seconds a ``google.rpc.RetryInfo`` among an error's ``details`` asks to wait
    (``{"@type": ".../google.rpc.RetryInfo", "retryDelay": "37s"}``, a protobuf
    Duration in JSON: seconds with an ``s``, fractions allowed), or None. Gemini's 429
    ``RESOURCE_EXHAUSTED`` carries it, often with no ``Retry-After`` header. The
    transport caps the wait at ``RetryPolicy.max_retry_after`` as for a header; a daily
    quota's (hours) reaches the caller whole in the failure's ``retry_after``."""
    for detail in details if isinstance(details, list) else ():
        if not isinstance(detail, Mapping) or detail.get("@type") != RETRY_INFO:
            continue
        delay = detail.get("retryDelay")
        found = _DURATION.fullmatch(delay.strip()) if isinstance(delay, str) else None
        if found is not None and float(found.group(1)) != math.inf:
            return float(found.group(1))
    return None


def _code(fields: Mapping[str, Any]) -> str | None:
    code = fields.get("code")
    if isinstance(code, str):
        return code
    # The classic shape carries a numeric code and the name in ``status``.
    return text_of(fields.get("status")) or (str(code) if isinstance(code, int) else None)


def cursor_reason(status: int | None, message: str, code: str | None) -> str | None:
    """``cursor_expired`` / ``cursor_invalid`` when the error is about the cursor."""
    if CURSOR_PARAM in message or _PREVIOUS.search(message):
        return "cursor_expired" if _GONE.search(message) else "cursor_invalid"
    not_found = status == 404 or code in NOT_FOUND_CODES
    if not_found and _INTERACTION.search(message):
        return "cursor_expired"
    return None


def context_exceeded(status: int | None, message: str) -> bool:
    """The input (on a cursor, the stored conversation) exceeds the model's window: a 400
    (or an in-stream error, without status) whose message says so."""
    return status in {None, 400} and _TOO_LONG.search(message) is not None


def stream_error_event(frame: Mapping[str, Any]) -> ProviderError:
    """``{"error": {"code", "message"}, "event_type": "error"}`` (flat fields tolerated)."""
    nested = error_object(frame.get("error"))  # a relay's text too
    return classify_fields(None, {}, nested if nested is not None else frame)
