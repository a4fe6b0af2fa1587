"""Error bodies of odd JSON from an upstream (a relay, a gateway): a ``code`` or
``param`` that is a list or an object, ``NaN`` or ``Infinity`` (which Python's ``json``
reads, and RFC 8259 does not allow). The Chat Completions classifier (OpenAI-compatible
servers, DeepSeek) raised ``TypeError: unhashable type`` or ``ValueError: Out of range
float values`` on them, so the answer lost its status: a 429 or a 503 became a "stream
failed" protocol error, never retried, and a 400 lost its type. Every provider's
classifier now gives the typed error of the status."""

from __future__ import annotations

import pytest

from turnstate.core._errors import (
    FatalProviderError,
    ProviderError,
    RateLimited,
    TransientProviderError,
)
from turnstate.emulators._emulated import kind_of

PROVIDERS = ("openai", "gemini", "openai-compatible", "deepseek", "anthropic")
BODIES = {
    "code-list": b'{"error": {"message": "m", "code": ["x"]}}',
    "code-object": b'{"error": {"message": "m", "code": {"a": 1}}}',
    "param-list": b'{"error": {"message": "unknown parameter", "param": ["seed"]}}',
    "type-list": b'{"error": {"message": "m", "type": []}}',
    "message-nan": b'{"error": {"message": NaN}}',
    "infinity-inside": b'{"error": {"message": "unsupported", "x": Infinity}}',
    "nan-code": b'{"error": {"message": "m", "code": NaN}}',
}
KINDS: dict[int, type[ProviderError]] = {
    400: FatalProviderError, 422: FatalProviderError, 429: RateLimited,
    503: TransientProviderError}


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("body", sorted(BODIES))
@pytest.mark.parametrize("status", sorted(KINDS))
def test_an_odd_error_body_keeps_the_status_type(provider: str, body: str, status: int) -> None:
    adapter = kind_of(provider).adapter(base_url="http://127.0.0.1:1", api_key="k")
    error = adapter.classify_error(status, {}, BODIES[body])
    assert isinstance(error, KINDS[status]), error
    assert error.status == status
    assert error.retryable is (status in (429, 503))
