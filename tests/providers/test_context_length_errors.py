"""The durable providers' context-length refusals are ``ContextLengthExceeded`` (a
``FatalProviderError``: no retry helps; on a cursor turn the engine degrades to a
trimmed replay), in HTTP bodies and in-stream, and nothing else is: cursor errors stay
``CursorRejected``, other 400s stay plain fatal errors."""

from __future__ import annotations

import json

import pytest

from turnstate.core._errors import (
    ContextLengthExceeded,
    CursorRejected,
    FatalProviderError,
    TransientProviderError,
)
from turnstate.providers.gemini_interactions import _errors as gemini
from turnstate.providers.openai_responses import _errors as openai

OPENAI_TOO_LONG = {"error": {
    "message": "Your input exceeds the context window of this model. Please adjust your "
               "input and try again.",
    "type": "invalid_request_error", "param": "input", "code": "context_length_exceeded"}}
GEMINI_MESSAGE = ("The input token count (1048577) exceeds the maximum number of tokens "
                  "allowed (1048576).")


def _body(value: object) -> bytes:
    return json.dumps(value).encode()


def test_openai_context_length_exceeded_body() -> None:
    error = openai.classify_body(400, {}, _body(OPENAI_TOO_LONG))
    assert isinstance(error, ContextLengthExceeded) and isinstance(error, FatalProviderError)
    assert (error.status, error.code, error.retryable) == (400, "context_length_exceeded",
                                                           False)
    assert error.kind == "context_length_exceeded"


def test_openai_context_length_exceeded_in_stream() -> None:
    flat = {"type": "error", **OPENAI_TOO_LONG["error"]}
    assert isinstance(openai.stream_error_event(flat), ContextLengthExceeded)
    assert isinstance(openai.stream_error_event({"error": OPENAI_TOO_LONG["error"]}),
                      ContextLengthExceeded)


@pytest.mark.parametrize("body", [
    {"error": {"message": "Previous response with id 'resp_1' not found.",
               "type": "invalid_request_error", "param": "previous_response_id",
               "code": "previous_response_not_found"}},
    {"error": {"message": "Invalid 'previous_response_id': 'x'.", "param":
               "previous_response_id", "code": "invalid_value"}},
])
def test_openai_cursor_errors_stay_cursor_errors(body: dict[str, object]) -> None:
    assert isinstance(openai.classify_body(400, {}, _body(body)), CursorRejected)


def test_openai_other_400_is_not_a_context_error() -> None:
    body = {"error": {"message": "Invalid value for 'temperature'.", "param": "temperature",
                      "code": "invalid_value", "type": "invalid_request_error"}}
    error = openai.classify_body(400, {}, _body(body))
    assert type(error) is FatalProviderError


@pytest.mark.parametrize("body", [
    {"error": {"code": "invalid_argument", "message": GEMINI_MESSAGE}},  # Interactions
    {"error": {"code": 400, "message": GEMINI_MESSAGE, "status": "INVALID_ARGUMENT"}},
])
def test_gemini_input_token_count_exceeds_the_maximum(body: dict[str, object]) -> None:
    error = gemini.classify_body(400, {}, _body(body))
    assert isinstance(error, ContextLengthExceeded) and not error.retryable
    assert error.status == 400


def test_gemini_context_error_in_stream() -> None:
    frame = {"error": {"code": "invalid_argument", "message": GEMINI_MESSAGE},
             "event_type": "error"}
    assert isinstance(gemini.stream_error_event(frame), ContextLengthExceeded)


@pytest.mark.parametrize(("status", "body", "kind"), [
    (400, {"error": {"code": "invalid_argument", "message": "Corrupted thought signature."}},
     FatalProviderError),
    (400, {"error": {"code": "invalid_argument",
                     "message": "Invalid value for previous_interaction_id: 'x'."}},
     CursorRejected),
    (404, {"error": {"code": "not_found", "message": "Previous interaction with id 'v1_a' "
                     "was not found or has expired."}}, CursorRejected),
    (503, {"error": {"code": "unavailable", "message": GEMINI_MESSAGE}},
     TransientProviderError),
])
def test_gemini_other_errors_keep_their_class(status: int, body: dict[str, object],
                                              kind: type) -> None:
    error = gemini.classify_body(status, {}, _body(body))
    assert type(error) is kind
