"""Numbers an upstream writes that Python's ``int`` refuses: a ``retry:`` field of
non-ASCII digits or of 5,000 digits, and a context-length refusal whose figures are
5,000 digits long. Each raised a bare ``ValueError`` out of the decoder or the
classifier (the turn aborted ``provider_failed`` naming ``ValueError``, a relay's
refusal lost its type ``ContextLengthExceeded``); a figure past any real count is no
figure either."""

from __future__ import annotations

import json

import pytest

from turnstate.core._errors import ContextLengthExceeded
from turnstate.emulators._emulated import kind_of
from turnstate.providers._errors import context_figures
from turnstate.providers._sse import SseDecoder

RETRIES = {"superscript": "²", "arabic-indic": "٣", "full-width": "１２",
           "5000-digits": "9" * 5000, "40-digits": "9" * 40}


@pytest.mark.parametrize("value", list(RETRIES.values()), ids=list(RETRIES))
def test_a_retry_field_that_is_no_ascii_count_is_ignored(value: str) -> None:
    events = SseDecoder().feed(f"retry: {value}\ndata: {{}}\n\n".encode())
    assert [(e.data, e.retry) for e in events] == [("{}", None)]


def test_a_retry_field_of_ascii_digits_is_kept() -> None:
    events = SseDecoder().feed(b"retry: 1500\ndata: {}\n\n")
    assert [e.retry for e in events] == [1500]


ANTHROPIC = "prompt is too long: {tokens} tokens > {window} maximum"


@pytest.mark.parametrize(("tokens", "window", "figures"), [
    ("9" * 5000, "200000", (None, 200000)),
    ("250000", "9" * 5000, (250000, None)),
    ("1" + "0" * 30, "200000", (None, 200000)),
    ("250,000", "200,000", (250000, 200000)),
    ("0", "0", (None, None)),
], ids=["5000-digit-tokens", "5000-digit-window", "1e30-tokens", "commas", "zeros"])
def test_context_figures_past_any_real_count_are_not_figures(
        tokens: str, window: str, figures: tuple[int | None, int | None]) -> None:
    assert context_figures(ANTHROPIC.format(tokens=tokens, window=window)) == figures


@pytest.mark.parametrize("provider", ["anthropic", "openai-compatible", "deepseek"])
def test_a_refusal_with_a_5000_digit_figure_is_still_a_context_refusal(provider: str) -> None:
    message = ANTHROPIC.format(tokens="9" * 5000, window="200000")
    body = json.dumps({"type": "error", "error": {
        "type": "invalid_request_error", "code": "context_length_exceeded",
        "message": message}}).encode()
    adapter = kind_of(provider).adapter(base_url="http://127.0.0.1:1", api_key="k")
    error = adapter.classify_error(400, {}, body)
    assert isinstance(error, ContextLengthExceeded)
    assert error.input_tokens is None and error.context_limit == 200000
