"""Every provider's context-length refusal is ``ContextLengthExceeded`` carrying the
provider's own figures when its message says them (the engine trims again by them,
table rule 10). Anthropic's "prompt is too long" and the OpenAI-compatible "maximum
context length" 400s were plain fatal errors before, without figures."""

from __future__ import annotations

import json

import pytest

from turnstate.core._errors import ContextLengthExceeded, FatalProviderError
from turnstate.providers._errors import context_figures
from turnstate.providers.anthropic import AnthropicAdapter
from turnstate.providers.chat_completions import ChatCompletionsAdapter
from turnstate.providers.deepseek import DeepSeekAdapter
from turnstate.providers.gemini_interactions import _errors as gemini
from turnstate.providers.openai_responses import _errors as openai

ANTHROPIC = {"type": "error", "error": {
    "type": "invalid_request_error",
    "message": "prompt is too long: 208310 tokens > 200000 maximum"}}
OPENAI_CHAT = {"error": {
    "message": "This model's maximum context length is 128000 tokens. However, your messages "
               "resulted in 130532 tokens. Please reduce the length of the messages.",
    "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}}
DEEPSEEK = {"error": {
    "message": "This model's maximum context length is 131072 tokens. However, you requested "
               "140000 tokens (136000 in the messages, 4000 in the completion). Please reduce "
               "the length of the messages or completion.",
    "type": "invalid_request_error", "param": None, "code": "invalid_request_error"}}
GEMINI = {"error": {"code": "invalid_argument", "message": (
    "The input token count (1048577) exceeds the maximum number of tokens allowed (1048576).")}}
RESPONSES = {"error": {"message": "Your input exceeds the context window of this model. Please "
                       "adjust your input and try again.", "type": "invalid_request_error",
                       "param": "input", "code": "context_length_exceeded"}}


def _body(value: object) -> bytes:
    return json.dumps(value).encode()


@pytest.mark.parametrize(("classify", "body", "figures"), [
    (AnthropicAdapter().classify_error, ANTHROPIC, (208_310, 200_000)),
    (ChatCompletionsAdapter().classify_error, OPENAI_CHAT, (130_532, 128_000)),
    (DeepSeekAdapter().classify_error, DEEPSEEK, (136_000, 131_072)),
    (gemini.classify_body, GEMINI, (1_048_577, 1_048_576)),
    (openai.classify_body, RESPONSES, (None, None)),
], ids=["anthropic", "openai-compatible", "deepseek", "gemini", "openai-responses"])
def test_a_refusal_as_too_long_carries_the_figures(classify, body, figures) -> None:  # type: ignore[no-untyped-def]
    error = classify(400, {}, _body(body))
    assert isinstance(error, ContextLengthExceeded) and not error.retryable
    assert (error.input_tokens, error.context_limit) == figures
    assert error.status == 400


@pytest.mark.parametrize(("classify", "status", "body"), [
    (AnthropicAdapter().classify_error, 400, {"type": "error", "error": {
        "type": "invalid_request_error", "message": "messages: roles must alternate"}}),
    (AnthropicAdapter().classify_error, 413, {"type": "error", "error": {
        "type": "request_too_large", "message": "Request exceeds the maximum allowed size."}}),
    (ChatCompletionsAdapter().classify_error, 400, {"error": {
        "message": "Invalid value for 'temperature'.", "type": "invalid_request_error",
        "param": "temperature", "code": "invalid_value"}}),
])
def test_other_client_errors_are_not_context_errors(classify, status, body) -> None:  # type: ignore[no-untyped-def]
    error = classify(status, {}, _body(body))
    assert isinstance(error, FatalProviderError)
    assert not isinstance(error, ContextLengthExceeded)


def test_a_500_that_mentions_the_context_stays_transient() -> None:
    error = ChatCompletionsAdapter().classify_error(503, {}, _body(OPENAI_CHAT))
    assert error.retryable and not isinstance(error, ContextLengthExceeded)


@pytest.mark.parametrize(("message", "figures"), [
    ("prompt is too long: 1,200,000 tokens > 1,000,000 maximum", (1_200_000, 1_000_000)),
    ("maximum context length is 8192 tokens, however you requested 9000 tokens",
     (9_000, 8_192)),
    ("The input is too long.", (None, None)),
    ("", (None, None)),
])
def test_context_figures(message: str, figures: tuple[int | None, int | None]) -> None:
    assert context_figures(message) == figures
