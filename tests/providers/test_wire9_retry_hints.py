"""The retry hints each provider documents are read (wire9): ``retry-after-ms`` (OpenAI
and Azure send it; the openai and anthropic SDKs read it before ``Retry-After``), and
Gemini's ``google.rpc.RetryInfo`` ``retryDelay`` in an error's ``details`` (its 429
``RESOURCE_EXHAUSTED`` carries it, often with no header), in a body and in a stream.
Before, both were ignored: a rate-limited call waited the transport's own backoff. And
``x-should-retry`` (OpenAI and Anthropic; both SDKs obey it over the status) decides
whether a failure is retried."""

from __future__ import annotations

import json

import pytest

from turnstate.core._errors import FatalProviderError, RateLimited, TransientProviderError
from turnstate.providers._errors import parse_retry_after
from turnstate.providers.anthropic._codec import classify_anthropic_error
from turnstate.providers.gemini_interactions._errors import classify_body, stream_error_event
from turnstate.providers.openai_responses._errors import classify_body as openai_body

OPENAI_429 = json.dumps({"error": {"message": "Rate limit reached", "type": "requests",
                                   "code": "rate_limit_exceeded", "param": None}}).encode()


def gemini_429(delay: str) -> dict[str, object]:
    return {"code": 429, "message": "Resource has been exhausted (e.g. check quota).",
            "status": "RESOURCE_EXHAUSTED", "details": [
                {"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": []},
                {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": delay}]}


def test_retry_after_ms_is_read_before_retry_after() -> None:
    assert parse_retry_after({"retry-after-ms": "1500", "retry-after": "2"}) == 1.5
    assert parse_retry_after({"Retry-After-Ms": "250"}) == 0.25
    assert parse_retry_after({"retry-after-ms": "soon", "retry-after": "2"}) == 2.0
    assert parse_retry_after({"retry-after-ms": "9" * 400}) is None
    error = openai_body(429, {"retry-after-ms": "1200"}, OPENAI_429)
    assert isinstance(error, RateLimited) and error.retry_after == 1.2


@pytest.mark.parametrize(("delay", "seconds"), [("37s", 37.0), ("3.700s", 3.7),
                                                ("52758s", 52758.0)])
def test_gemini_retry_info_is_the_rate_limits_wait(delay: str, seconds: float) -> None:
    body = json.dumps({"error": gemini_429(delay)}).encode()
    error = classify_body(429, {}, body)
    assert isinstance(error, RateLimited) and error.retry_after == seconds
    streamed = stream_error_event({"event_type": "error", "error": gemini_429(delay)})
    assert isinstance(streamed, RateLimited) and streamed.retry_after == seconds


def test_a_header_wins_and_a_bad_delay_is_no_hint() -> None:
    body = json.dumps({"error": gemini_429("37s")}).encode()
    error = classify_body(429, {"Retry-After": "5"}, body)
    assert isinstance(error, RateLimited) and error.retry_after == 5.0
    for bad in ("37", "soon", "9" * 400 + "s", "-3s"):
        error = classify_body(429, {}, json.dumps({"error": gemini_429(bad)}).encode())
        assert isinstance(error, RateLimited) and error.retry_after is None, bad
    unavailable = classify_body(503, {}, json.dumps({"error": {
        "code": 503, "message": "The model is overloaded.", "status": "UNAVAILABLE"}}).encode())
    assert isinstance(unavailable, TransientProviderError)


def test_x_should_retry_decides_over_the_status() -> None:
    overloaded = json.dumps({"type": "error", "error": {"type": "overloaded_error",
                                                         "message": "Overloaded"}}).encode()
    assert isinstance(classify_anthropic_error("anthropic", 529, {}, overloaded),
                      TransientProviderError)
    refused = classify_anthropic_error("anthropic", 529, {"x-should-retry": "false"},
                                       overloaded)
    assert isinstance(refused, FatalProviderError) and not refused.retryable
    conflict = openai_body(409, {"X-Should-Retry": "false"}, OPENAI_429)
    assert not conflict.retryable
    told = openai_body(400, {"x-should-retry": "true"}, OPENAI_429)
    assert isinstance(told, TransientProviderError) and told.retryable
    assert isinstance(openai_body(429, {"x-should-retry": "maybe"}, OPENAI_429), RateLimited)
