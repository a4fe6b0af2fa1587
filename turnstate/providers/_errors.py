"""Classifying provider errors: error bodies, ``Retry-After``, quota codes, statuses,
and the durable APIs' shared rules (cursor first, then tool pairing, then status)."""

from __future__ import annotations

import json
import logging
import math
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

import attrs

from turnstate.core._errors import (
    ContextLengthExceeded,
    CursorRejected,
    FatalProviderError,
    ProviderError,
    RateLimited,
    TransientProviderError,
)
from turnstate.core._json import JsonObject
from turnstate.providers._frames import MAX_TOKEN_COUNT

logger = logging.getLogger("turnstate")

TRANSIENT_STATUSES = frozenset({408, 409})  # besides every 5xx (529 included)


def _no_constant(name: str) -> Any:
    """``NaN``, ``Infinity``, ``-Infinity``: Python's ``json`` reads them, RFC 8259 has
    no such values, and the classifiers' ``compact_json`` refused them with a bare
    ``ValueError``; a body holding one is no JSON (``error_fields`` reads it as text)."""
    msg = f"{name} is not JSON"
    raise ValueError(msg)


def _loads(body: bytes) -> Any:
    """An error body's JSON, strictly (``_no_constant``).

    Raises:
        ValueError: not JSON.
        RecursionError: nested past the parser's stack.
    """
    return json.loads(body.decode("utf-8", errors="replace"), parse_constant=_no_constant)


def error_fields(body: bytes) -> JsonObject:
    """The ``error`` object of an error body (``{"error": {...}}``), or ``{}``.

    Accepts the OpenAI/DeepSeek shape, Anthropic's ``{"type":"error","error":{...}}``
    and Gemini's ``{"error":{"code","message"}}``. Non-JSON bodies give
    ``{"message": <text>}``.
    """
    try:
        data = _loads(body) if body else {}
    except (ValueError, RecursionError):  # RecursionError: nested past the parser's stack
        return {"message": body.decode("utf-8", errors="replace")[:500]}
    if isinstance(data, dict):
        inner = data.get("error")
        if isinstance(inner, dict):
            return inner
        if isinstance(inner, str):
            return {"message": inner}
        return data
    return {}


def holds_error(body: bytes) -> bool:
    """Whether ``body`` is a JSON error object: ``{"error": {...}}`` or ``{"error":
    "<text>"}`` (OpenAI, DeepSeek, Gemini, gateways; Anthropic's ``{"type": "error",
    "error": {...}}`` included)."""
    try:
        data = _loads(body)
    except (ValueError, RecursionError):
        return False
    return isinstance(data, dict) and isinstance(data.get("error"), dict | str)


_DELTA_SECONDS = re.compile(r"[0-9]+(?:\.[0-9]+)?")
"""RFC 9110's delta-seconds (ASCII digits), and the decimal fraction some servers send."""


def _header(headers: Mapping[str, str], name: str) -> str | None:
    """The value of header ``name`` (lower case), stripped, or None."""
    for key, item in headers.items():
        if key.lower() == name:
            return item.strip()
    return None


def parse_retry_after(headers: Mapping[str, str]) -> float | None:
    """The server's wait in seconds, or None: ``retry-after-ms`` (the OpenAI API's
    milliseconds, which its SDKs read first) when it is delta digits, else
    ``Retry-After`` (delta-seconds or an HTTP date). How long a wait is honoured is the
    retry policy's (``RetryPolicy.max_retry_after``)."""
    millis = _delta(_header(headers, "retry-after-ms") or "")
    if millis is not None:
        return millis / 1000
    value = _header(headers, "retry-after")
    if not value:
        return None
    if _DELTA_SECONDS.fullmatch(value):
        return _delta(value)  # None for 400 digits: infinite, no JSON number
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def _delta(value: str) -> float | None:
    """Delta digits as a number; None for anything else (not ``float()``: it reads
    ``inf``, ``nan``, ``1e999``, ``1_0`` and a minus sign) or for 400 digits, which are
    infinite as a float and no JSON number."""
    if not _DELTA_SECONDS.fullmatch(value):
        return None
    number = float(value)
    return number if number != math.inf else None


QUOTA_CODES = frozenset({
    "insufficient_quota",  # OpenAI (and OpenAI-compatible servers), sent with HTTP 429
    "billing_hard_limit_reached", "billing_not_active",  # OpenAI
    "billing_error",  # Anthropic (HTTP 402)
    "insufficient_balance", "insufficient_funds", "payment_required",  # DeepSeek, relays
})
"""Error codes (or types) that say the account cannot pay: fatal whatever the status
(OpenAI sends ``insufficient_quota`` as a 429), in a body or inside a stream."""


def quota_code(fields: Mapping[str, Any]) -> str | None:
    """The ``code`` or ``type`` of an error object that is a quota or billing error."""
    for key in ("code", "type"):
        value = fields.get(key)
        if isinstance(value, str) and value in QUOTA_CODES:
            return value
    return None


def status_error(
    provider: str, status: int, headers: Mapping[str, str], detail: str, code: str | None
) -> ProviderError:
    """The generic classification: a quota or billing code fatal, 429 rate limited,
    408/409/5xx/529 transient, else fatal; an ``x-should-retry`` header decides over the
    status (``should_retry``)."""
    hint = should_retry(headers)
    if code in QUOTA_CODES or hint is False:
        return FatalProviderError(provider, detail, status=status, code=code)
    if status == 429:
        return RateLimited(provider, detail, status=status, code=code,
                           retry_after=parse_retry_after(headers))
    if status in TRANSIENT_STATUSES or status >= 500 or hint is True:
        return TransientProviderError(provider, detail, status=status, code=code)
    return FatalProviderError(provider, detail, status=status, code=code)


def should_retry(headers: Mapping[str, str]) -> bool | None:
    """The server's own word on retrying, ``x-should-retry: true|false`` (OpenAI and
    Anthropic send it; their SDKs obey it before any status rule: "If the server
    explicitly says whether or not to retry, obey"), or None."""
    value = _header(headers, "x-should-retry")
    return True if value == "true" else False if value == "false" else None


_NUMBER = r"([0-9][0-9,]*)"
_FIGURES = (
    # Gemini: "The input token count (N) exceeds the maximum number of tokens allowed (M)."
    (re.compile(rf"input token count \({_NUMBER}\) exceeds the maximum number of tokens "
                rf"allowed \({_NUMBER}\)", re.IGNORECASE), 1, 2),
    # Anthropic: "prompt is too long: N tokens > M maximum"
    (re.compile(rf"prompt is too long: {_NUMBER} tokens > {_NUMBER} maximum", re.IGNORECASE),
     1, 2),
    # DeepSeek: "... maximum context length is M tokens. However, you requested T tokens
    # (N in the messages, K in the completion)."
    (re.compile(rf"maximum context length is {_NUMBER} tokens.*?requested {_NUMBER} tokens "
                rf"\({_NUMBER} in the messages", re.IGNORECASE | re.DOTALL), 3, 1),
    # OpenAI Chat Completions: "... maximum context length is M tokens. However, your
    # messages resulted in N tokens."
    (re.compile(rf"maximum context length is {_NUMBER} tokens.*?(?:resulted in|requested) "
                rf"{_NUMBER} tokens", re.IGNORECASE | re.DOTALL), 2, 1),
)
"""How providers say the figures of a context-length refusal: a pattern, then the group
of the input's token count and the group of the window."""

CONTEXT_LENGTH_MESSAGE = re.compile(
    r"maximum context length|prompt is too long|exceeds the context window"
    r"|exceeds the maximum number of tokens|context[ _]length[ _]exceeded", re.IGNORECASE)
"""How the OpenAI-compatible and Anthropic APIs say, in a 400's message, that the input
is longer than the model's window (their codes are the generic ``invalid_request_error``)."""


def context_figures(message: str) -> tuple[int | None, int | None]:
    """The provider's own input token count and window in a context-length refusal's
    message, when it says them (``(None, None)`` otherwise)."""
    for pattern, tokens, window in _FIGURES:
        found = pattern.search(message)
        if found is not None:
            return _figure(found.group(tokens)), _figure(found.group(window))
    return None, None


def _figure(digits: str) -> int | None:
    """A figure of a refusal's message (``250,000``), or None when it is no count of a
    real request: 0, or past ``MAX_TOKEN_COUNT``, as a usage field. ``int`` refused 5,000
    digits with a bare ``ValueError`` out of the classifier, and ``10**30`` would have
    been learnt as the chat's scale."""
    digits = digits.replace(",", "")
    if len(digits) > len(str(MAX_TOKEN_COUNT)):
        return None
    value = int(digits)
    return value if 0 < value <= MAX_TOKEN_COUNT else None


def context_length_error(
    provider: str, message: str, *, status: int | None, code: str | None
) -> ContextLengthExceeded:
    """``ContextLengthExceeded`` with the figures its message gives."""
    tokens, window = context_figures(message)
    return ContextLengthExceeded(provider, message, status=status, code=code,
                                 input_tokens=tokens, context_limit=window)


TOOL_PAIRING_MESSAGES = (
    "No tool output found for function call",
    "No tool call found for function call output",
)
"""How the durable APIs say a request's calls and outputs do not pair up."""


@attrs.frozen(kw_only=True)
class StreamCodes:
    """A provider's in-stream error codes that a retry may help with."""

    provider: str
    rate_limited: frozenset[str]
    transient: frozenset[str]


def classify_durable(
    codes: StreamCodes, status: int | None, headers: Mapping[str, str], *, message: str,
    code: str | None, cursor_reason: str | None, context_exceeded: bool = False,
) -> ProviderError:
    """The classification the Responses and Interactions APIs share, once the provider
    has read ``code`` and decided ``cursor_reason`` and ``context_exceeded``: the cursor
    first, then an input longer than the context window (``ContextLengthExceeded``, whatever
    the status: no retry helps), then a tool
    pairing complaint (turnstate renders every call with its output, so the provider
    saying otherwise is a rendering bug: logged at ERROR, fatal), then by status, or
    for an in-stream error (``status`` None) or one sent with a 2xx status (which says
    nothing about it) by code."""
    provider = codes.provider
    if cursor_reason is not None:
        return CursorRejected(provider, message, reason=cursor_reason, status=status, code=code)
    if context_exceeded:
        return context_length_error(provider, message, status=status, code=code)
    if message.startswith(TOOL_PAIRING_MESSAGES):
        logger.error("[provider][bug] %s rejected the tool pairing of a request: %s",
                     provider, message)
        return FatalProviderError(provider, message, status=status, code=code)
    if status is not None and not 200 <= status < 300:
        return status_error(provider, status, headers, message, code)
    if code in QUOTA_CODES:
        return FatalProviderError(provider, message, status=status, code=code)
    if code in codes.rate_limited:
        return RateLimited(provider, message, status=status, code=code)
    if code in codes.transient:
        return TransientProviderError(provider, message, status=status, code=code)
    return FatalProviderError(provider, message, status=status, code=code)


CANCELLED = "cancelled"


def cancelled_error(provider: str, what: str) -> FatalProviderError:
    """The failure of a response or interaction the provider says was cancelled."""
    msg = (f"the {what} was cancelled at the provider before it finished: what it said "
           "is no answer")
    return FatalProviderError(provider, msg, code=CANCELLED)
