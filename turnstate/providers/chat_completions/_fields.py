"""What a Chat Completions chunk's or body's fields mean: usage, finish reasons and
in-stream error objects (shared by the stream parser and the body reader)."""

from __future__ import annotations

from collections.abc import Callable

from turnstate.core._conversation import Usage
from turnstate.core._errors import (
    FatalProviderError,
    ProviderError,
    RateLimited,
    TransientProviderError,
)
from turnstate.core._json import JsonObject
from turnstate.providers._errors import quota_code
from turnstate.providers._frames import int_field, object_of, text_of

UsageReader = Callable[[JsonObject], tuple[Usage, JsonObject]]
"""A ``usage`` object → engine usage and the audit metadata it contributes."""

FINISH_REASONS = {"stop": "stop", "length": "length", "tool_calls": "tool_calls",
                  "function_call": "tool_calls", "content_filter": "content_filter"}
_RATE_CODES = frozenset({"rate_limit_exceeded", "rate_limit_error", "requests", "tokens"})
_TRANSIENT_CODES = frozenset({"server_error", "overloaded", "overloaded_error",
                              "service_unavailable", "api_error", "timeout"})


def read_chat_usage(raw: JsonObject) -> tuple[Usage, JsonObject]:
    """OpenAI usage: prompt and completion tokens, cached and reasoning details.

    OpenAI and DeepSeek count reasoning inside ``completion_tokens``; xAI counts it
    beside them (its ``total_tokens`` is prompt + completion + reasoning, and it bills
    the reasoning as output), so there the reasoning is added to the output.
    """
    prompt_details = object_of(raw.get("prompt_tokens_details"))
    prompt = int_field(raw.get("prompt_tokens"))
    completion = int_field(raw.get("completion_tokens"))
    reasoning = int_field(object_of(raw.get("completion_tokens_details")).get("reasoning_tokens"))
    if reasoning and int_field(raw.get("total_tokens")) == prompt + completion + reasoning:
        completion += reasoning
    usage = Usage(
        input_tokens=prompt,
        output_tokens=completion,
        cached_input_tokens=int_field(prompt_details.get("cached_tokens")),
        cache_write_tokens=int_field(prompt_details.get("cache_write_tokens")),
        reasoning_tokens=reasoning,
    )
    return usage, {}


INTERRUPTED_FINISH = frozenset({"insufficient_system_resource"})
"""Finish reasons that say the server broke the answer off, not that it ended: DeepSeek's
``insufficient_system_resource`` ("the request is interrupted due to insufficient
resource of the inference system", its Create Chat Completion reference). Read as a
retryable ``TransientProviderError`` (retried when nothing was shown yet), never as a
completed answer: the text before it is a fragment, and a tool call in flight is cut."""


def check_finish(provider: str, reason: str) -> None:
    """Raise for a finish reason in ``INTERRUPTED_FINISH``."""
    if reason in INTERRUPTED_FINISH:
        msg = f"the server interrupted the answer (finish_reason {reason!r})"
        raise TransientProviderError(provider, msg, code=reason)


def normalise_finish(reason: str | None) -> str | None:
    if reason is None:
        return None
    return FINISH_REASONS.get(reason, reason)


def stream_error(provider: str, fields: JsonObject, status: int | None = None,
                 ) -> ProviderError:
    """An error object sent inside a stream, or as a 2xx body (``status``), classified
    by its code."""
    detail = text_of(fields.get("message")) or "error in stream"
    raw = fields.get("code") if fields.get("code") is not None else fields.get("type")
    code = str(raw) if raw is not None else None
    if quota := quota_code(fields):
        return FatalProviderError(provider, detail, status=status, code=quota)
    if code in _RATE_CODES or raw == 429:
        return RateLimited(provider, detail, status=status, code=code)
    if code in _TRANSIENT_CODES or (isinstance(raw, int) and raw >= 500):
        return TransientProviderError(provider, detail, status=status, code=code)
    return FatalProviderError(provider, detail, status=status, code=code)
