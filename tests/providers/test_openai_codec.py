"""OpenAI Responses requests, replay rendering, error classification and envelope."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from typing import Any

import attrs
import pytest

from tests.providers.support import cursor_defaults, message, provider_call, request_json
from turnstate.core._context import ContextSettings
from turnstate.core._conversation import (
    ReasoningPart,
    Role,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    ToolSpec,
    TransitionPart,
)
from turnstate.core._decisions import Strategy, TurnContext
from turnstate.core._envelope import Mode, parse_envelope, serialize_envelope
from turnstate.core._errors import (
    ConfigurationError,
    CursorRejected,
    FatalProviderError,
    RateLimited,
    TransientProviderError,
)
from turnstate.core._registry import DEFAULT_REGISTRY
from turnstate.providers import ProviderCall, ProviderResponse
from turnstate.providers.openai_responses import OpenAIResponsesAdapter, classify_fields

NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
MODEL = DEFAULT_REGISTRY.model("openai", "gpt-5-mini")
TOOLS = (ToolSpec(name="weather", description="Weather for a city.",
                  parameters={"type": "object", "properties": {"city": {"type": "string"}},
                              "required": ["city"]}),)
ADAPTER = OpenAIResponsesAdapter(base_url="https://api.example.test/v1/", api_key="sk-secret")


def call(**kw: Any) -> ProviderCall:
    return provider_call(cursor_defaults(MODEL, TOOLS), **kw)


def body(request_call: ProviderCall, adapter: OpenAIResponsesAdapter = ADAPTER) -> Any:
    return request_json(adapter, request_call)


REASONING = ReasoningPart(provider="openai", model="gpt-5-mini-2025-08-07", kind="reasoning",
                          text="Think first.", data="gAAAA-blob", signature="rs_think1")
HISTORY = (
    message(1, Role.USER, TextPart(text="Weather in Paris and Oslo?")),
    message(2, Role.ASSISTANT,
            REASONING,
            TextPart(text="Let me "), TextPart(text="check."),
            ToolCallPart(call_id="call_A", name="weather", arguments='{"city":"Paris"}',
                         provider="openai", model="gpt-5-mini"),
            ToolCallPart(call_id="call_B", name="weather", arguments='{"city":"Oslo"}'),
            ToolResultPart(call_id="call_A", name="weather", output="sunny"),
            ToolResultPart(call_id="call_B", name="weather", output="rain", is_error=False),
            TextPart(text="Paris is sunny, Oslo rainy."),
            ),
    message(3, Role.USER, TextPart(text="Thanks!")),
    message(4, Role.ASSISTANT, TextPart(text="You're welcome.")),
)
TOOL_JSON = {"type": "function", "name": "weather", "description": "Weather for a city.",
             "parameters": TOOLS[0].parameters, "strict": False}


# --- requests ------------------------------------------------------------------------


def test_cursor_request_sends_only_the_new_user_message() -> None:
    """A turn's first cursor call chains on the cursor and resends instructions and tools."""
    request = ADAPTER.build_request(call(cursor="resp_123", user_text="And Rome?"))
    assert request.method == "POST"
    assert request.url == "https://api.example.test/v1/responses"
    assert request.headers["authorization"] == "Bearer sk-secret"
    assert request.headers["accept"] == "text/event-stream"
    assert json.loads(request.body) == {
        "model": "gpt-5-mini", "instructions": "Be brief.", "previous_response_id": "resp_123",
        "input": [{"type": "message", "role": "user", "content": "And Rome?"}],
        "tools": [TOOL_JSON], "store": True, "stream": True,
        "context_management": [{"type": "compaction", "compact_threshold": 320_000}],
    }
    assert b" " not in request.body.replace(b"Be brief.", b"").replace(b"And Rome?", b"") \
        .replace(b"Weather for a city.", b"")


def test_cursor_request_ignores_history() -> None:
    """With a cursor the committed history is the server's business: nothing is resent."""
    assert body(call(cursor="resp_1", history=HISTORY, user_text="x"))["input"] == [
        {"type": "message", "role": "user", "content": "x"}]


def test_tool_continuation_sends_function_outputs_on_the_newest_id() -> None:
    """After a tool iteration only the outputs go, chained on the newest response id."""
    results = (ToolResultPart(call_id="call_1", name="weather", output="sunny"),
               ToolResultPart(call_id="call_2", name="weather", output='{"t": 3}',
                              is_error=True))
    sent = body(call(cursor="resp_newest", tool_results=results, iteration=1,
                     user_text="ignored"))
    assert sent["previous_response_id"] == "resp_newest"
    assert sent["input"] == [
        {"type": "function_call_output", "call_id": "call_1", "output": "sunny"},
        {"type": "function_call_output", "call_id": "call_2", "output": '{"t": 3}'},
    ]
    assert sent["instructions"] == "Be brief." and sent["tools"] == [TOOL_JSON]


def test_replay_renders_history_without_server_ids() -> None:
    """Replay sends the history as input items in order, with no fc_/msg_ ids; the
    reasoning item carries the rs_ id the API reference requires beside its encrypted
    content (the dated snapshot's reasoning counts as the configured model's)."""
    sent = body(call(strategy=Strategy.REPLAY, history=HISTORY, user_text="One more?"))
    assert "previous_response_id" not in sent
    assert sent["input"] == [
        {"type": "message", "role": "user", "content": "Weather in Paris and Oslo?"},
        {"type": "reasoning", "id": "rs_think1",
         "summary": [{"type": "summary_text", "text": "Think first."}],
         "encrypted_content": "gAAAA-blob"},
        {"type": "message", "role": "assistant", "content": "Let me check."},
        {"type": "function_call", "call_id": "call_A", "name": "weather",
         "arguments": '{"city":"Paris"}'},
        {"type": "function_call", "call_id": "call_B", "name": "weather",
         "arguments": '{"city":"Oslo"}'},
        {"type": "function_call_output", "call_id": "call_A", "output": "sunny"},
        {"type": "function_call_output", "call_id": "call_B", "output": "rain"},
        {"type": "message", "role": "assistant", "content": "Paris is sunny, Oslo rainy."},
        {"type": "message", "role": "user", "content": "Thanks!"},
        {"type": "message", "role": "assistant", "content": "You're welcome."},
        {"type": "message", "role": "user", "content": "One more?"},
    ]
    assert all("id" not in item for item in sent["input"] if item["type"] != "reasoning")


def test_replay_sends_encrypted_reasoning_of_the_same_model_only() -> None:
    """Reasoning with encrypted content is replayed (with its id) to its own model only;
    a part stored without an id (before ids were kept) is not replayed."""
    history = (message(1, Role.USER, TextPart(text="q")),
               message(2, Role.ASSISTANT, REASONING, TextPart(text="a")))
    sent = body(call(strategy=Strategy.REPLAY, history=history, user_text="next"))
    assert sent["input"][1] == {"type": "reasoning", "encrypted_content": "gAAAA-blob",
                                "id": "rs_think1",
                                "summary": [{"type": "summary_text", "text": "Think first."}]}
    no_id = (history[0], message(2, Role.ASSISTANT, attrs.evolve(REASONING, signature=None),
                                 TextPart(text="a")))
    sent = body(call(strategy=Strategy.REPLAY, history=no_id, user_text="next"))
    assert [item["type"] for item in sent["input"]] == ["message", "message", "message"]
    other = DEFAULT_REGISTRY.model("openai", "gpt-5")
    sent = body(call(strategy=Strategy.REPLAY, model=other, history=history, user_text="n"))
    assert [item["type"] for item in sent["input"]] == ["message", "message", "message"]


def test_reasoning_without_encrypted_content_or_of_another_provider_is_not_sent() -> None:
    """Without a blob, or from another provider, the reasoning stays out."""
    parts = (ReasoningPart(provider="openai", model="gpt-5-mini", kind="reasoning", text="t"),
             ReasoningPart(provider="anthropic", model="gpt-5-mini", kind="thinking",
                           data="x", signature="s"),
             TextPart(text="a"))
    history = (message(1, Role.USER, TextPart(text="q")), message(2, Role.ASSISTANT, *parts))
    sent = body(call(strategy=Strategy.REPLAY, history=history, user_text="n"))
    assert [item["type"] for item in sent["input"]] == ["message", "message", "message"]


def test_transition_parts_do_not_split_text() -> None:
    """A continuation_transition part is not conversation and does not break a message."""
    parts = (TextPart(text="a"), TransitionPart(reason="cursor_expired", strategy="replay",
                                                source_state="cursor"), TextPart(text="b"))
    history = (message(1, Role.USER, TextPart(text="q")), message(2, Role.ASSISTANT, *parts))
    sent = body(call(strategy=Strategy.REPLAY, history=history, user_text="n"))
    assert sent["input"][1] == {"type": "message", "role": "assistant", "content": "ab"}


def test_compaction_follows_the_context_settings() -> None:
    """context_management is present when enabled (threshold from settings) and absent
    when disabled."""
    custom = ContextSettings(compact_threshold=5_000)
    assert body(call(cursor="resp_1", settings=custom))["context_management"] == [
        {"type": "compaction", "compact_threshold": 5_000}]
    off = ContextSettings(provider_compaction_enabled=False)
    assert "context_management" not in body(call(cursor="resp_1", settings=off))


def test_optional_fields_are_left_out() -> None:
    """No system prompt and no tools: no instructions and no tools keys; no key, no auth."""
    adapter = OpenAIResponsesAdapter()
    request = adapter.build_request(call(system_prompt="", tools=(), user_text="hi"))
    sent = json.loads(request.body)
    assert "instructions" not in sent and "tools" not in sent
    assert "authorization" not in request.headers
    assert request.url == "https://api.openai.com/v1/responses"


def test_reasoning_options_are_sent() -> None:
    """The adapter's reasoning object and encrypted-content include go into every request."""
    adapter = OpenAIResponsesAdapter(reasoning={"effort": "low", "summary": "auto"},
                                     include_encrypted_reasoning=True)
    sent = body(call(cursor="resp_1"), adapter)
    assert sent["reasoning"] == {"effort": "low", "summary": "auto"}
    assert sent["include"] == ["reasoning.encrypted_content"]


def test_a_tool_continuation_needs_a_cursor() -> None:
    """Tool results without the newest response id cannot be sent (a driver bug)."""
    results = (ToolResultPart(call_id="c", name="t", output="o"),)
    with pytest.raises(ConfigurationError, match="newest response id"):
        ADAPTER.build_request(call(strategy=Strategy.REPLAY, tool_results=results))


def test_the_key_stays_out_of_reprs() -> None:
    """Neither the adapter nor its request prints the API key."""
    assert "sk-secret" not in repr(ADAPTER)
    assert "sk-secret" not in repr(ADAPTER.build_request(call(cursor="resp_1")))


# --- adapter protocol ----------------------------------------------------------------


def test_envelope_names_the_response_id() -> None:
    """The envelope is mode responses with the response id, createdAt and coversSeq."""
    ctx = TurnContext(provider="openai", model_name="gpt-5-mini", system_prompt_hash="h1",
                      toolset_hash="h2", committed_seq=4, now=NOW)
    response = ProviderResponse(response_id="resp_new", parts=())
    envelope = ADAPTER.envelope(ctx, response, loop_messages=(), now=NOW, covers_seq=6)
    assert envelope.mode is Mode.RESPONSES and envelope.cursor == "resp_new"
    assert envelope.created_at == NOW and envelope.covers_seq == 6
    assert envelope.provider == "openai" and envelope.model_name == "gpt-5-mini"
    assert parse_envelope(serialize_envelope(envelope)) == envelope
    assert ADAPTER.extend_loop(call(), response, ()) == ()
    assert ADAPTER.provider == "openai"


# --- error classification ------------------------------------------------------------


def http(status: int, error: dict[str, Any], headers: dict[str, str] | None = None) -> Any:
    return ADAPTER.classify_error(status, headers or {}, json.dumps({"error": error}).encode())


def test_previous_response_not_found_is_cursor_expired() -> None:
    """The observed 400 for a missing cursor (providers-wire.md 1.7)."""
    error = http(400, {"message": "Previous response with id 'resp_abc' not found.",
                       "type": "invalid_request_error", "code": "previous_response_not_found",
                       "param": "previous_response_id"})
    assert isinstance(error, CursorRejected) and error.reason == "cursor_expired"
    assert error.status == 400 and error.code == "previous_response_not_found"
    assert "resp_abc" in error.detail


def test_not_found_message_on_the_cursor_param_is_cursor_expired() -> None:
    """invalid_request_error on previous_response_id saying "not found", code null."""
    error = http(400, {"message": "Previous response with id 'resp_x' not found.",
                       "type": "invalid_request_error", "code": None,
                       "param": "previous_response_id"})
    assert isinstance(error, CursorRejected) and error.reason == "cursor_expired"


@pytest.mark.parametrize("message, code", [
    ("Invalid `previous_response_id`.", "invalid_request_error"),
    ("Invalid 'previous_response_id': 'abc'. Expected an ID that begins with 'resp'.",
     "invalid_value"),
])
def test_invalid_previous_response_id_is_cursor_invalid(message: str, code: str) -> None:
    """The "Invalid `previous_response_id`." variant and malformed ids."""
    error = http(400, {"message": message, "type": "invalid_request_error", "code": code,
                       "param": "previous_response_id" if code == "invalid_value" else None})
    assert isinstance(error, CursorRejected) and error.reason == "cursor_invalid"


@pytest.mark.parametrize("message", [
    "No tool output found for function call call_XXXX.",
    "No tool call found for function call output with call_id call_XXXX.",
])
def test_tool_pairing_errors_are_fatal_and_logged_as_bugs(
    message: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A call without its output (or the reverse) is turnstate's bug: fatal, ERROR log."""
    with caplog.at_level(logging.ERROR, logger="turnstate"):
        error = http(400, {"message": message, "type": "invalid_request_error",
                           "param": "input", "code": None})
    assert type(error) is FatalProviderError and error.status == 400
    assert [r.levelno for r in caplog.records if r.name == "turnstate"] == [logging.ERROR]
    assert message in caplog.text


def test_generic_statuses() -> None:
    """429 rate limited with Retry-After, 5xx and 529 transient, 401 and 404 fatal."""
    limited = http(429, {"message": "Rate limit reached", "type": "requests",
                         "code": "rate_limit_exceeded"}, {"retry-after": "7"})
    assert isinstance(limited, RateLimited) and limited.retry_after == 7.0
    assert type(http(500, {"message": "oops", "type": "server_error"})) \
        is TransientProviderError
    assert type(http(529, {"message": "overloaded"})) is TransientProviderError
    assert type(http(401, {"message": "Incorrect API key provided"})) is FatalProviderError
    item = http(404, {"message": "Item with id 'rs_1' not found. Items are not persisted when "
                                 "`store` is set to false.", "param": "input"})
    assert type(item) is FatalProviderError


def test_non_json_error_body() -> None:
    """A gateway's HTML error page is classified by status alone."""
    error = ADAPTER.classify_error(502, {}, b"<html>Bad gateway</html>")
    assert type(error) is TransientProviderError and "Bad gateway" in error.detail


def test_in_stream_errors_are_classified_by_code() -> None:
    """No status in-stream: quota fatal, server errors transient, rate limits, cursors."""
    assert type(classify_fields(None, {}, {"code": "insufficient_quota", "message": "q"})) \
        is FatalProviderError
    assert type(classify_fields(None, {}, {"code": "server_error", "message": "s"})) \
        is TransientProviderError
    assert type(classify_fields(None, {}, {"code": "rate_limit_exceeded", "message": "r"})) \
        is RateLimited
    cursor = classify_fields(None, {}, {"code": "previous_response_not_found", "message": "m"})
    assert isinstance(cursor, CursorRejected) and cursor.status is None


def test_recovery_replay_appends_this_turns_calls_and_results_without_ids() -> None:
    """A recovering replay sends the user's message, then this turn's calls and outputs
    as items of their own, with no server item ids."""
    sent = body(call(strategy=Strategy.REPLAY, history=HISTORY[:1], user_text="Again?",
                     turn_parts=HISTORY[1].parts))
    assert "previous_response_id" not in sent
    assert [item["type"] for item in sent["input"]] == [
        "message", "message", "reasoning", "message", "function_call", "function_call",
        "function_call_output", "function_call_output", "message"]
    assert sent["input"][1] == {"type": "message", "role": "user", "content": "Again?"}
    assert all("id" not in item for item in sent["input"] if item["type"] != "reasoning")
