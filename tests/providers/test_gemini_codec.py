"""Gemini Interactions requests, replay steps, error classification and envelope."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from typing import Any

import pytest

from tests.providers.support import cursor_defaults, message, provider_call, request_json
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
from turnstate.providers.gemini_interactions import GeminiInteractionsAdapter, classify_fields

NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
MODEL = DEFAULT_REGISTRY.model("gemini", "gemini-2.5-flash")
TOOLS = (ToolSpec(name="getWeather", description="Weather.",
                  parameters={"type": "object", "properties": {"location": {"type": "string"}}}),)
ADAPTER = GeminiInteractionsAdapter(api_key="AIza-secret",
                                    generation_config={"thinking_level": "low"})
TOOL_JSON = {"type": "function", "name": "getWeather", "description": "Weather.",
             "parameters": TOOLS[0].parameters}


def call(**kw: Any) -> ProviderCall:
    return provider_call(cursor_defaults(MODEL, TOOLS), **kw)


def body(request_call: ProviderCall, adapter: GeminiInteractionsAdapter = ADAPTER) -> Any:
    return request_json(adapter, request_call)


THOUGHT = ReasoningPart(provider="gemini", model="gemini-2.5-flash", kind="thought",
                        text="summary", signature="sig-thought")
HISTORY = (
    message(1, Role.USER, TextPart(text="Weather in SF?")),
    message(2, Role.ASSISTANT, THOUGHT, TextPart(text="Checking."),
            ToolCallPart(call_id="61nzpsv4", name="getWeather",
                         arguments='{"location":"San Francisco"}', provider="gemini",
                         model="gemini-2.5-flash", signature="sig-call"),
            ToolResultPart(call_id="61nzpsv4", name="getWeather", output="27C sunny"),
            TransitionPart(reason="cursor_expired", strategy="replay", source_state="cursor"),
            TextPart(text="It is "), TextPart(text="sunny.")),
)


def test_cursor_request_sends_one_user_input_step() -> None:
    """The first call of a cursor turn chains on the cursor and resends the scoped fields."""
    request = ADAPTER.build_request(call(cursor="v1_abc", user_text="And tomorrow?"))
    assert request.url == ("https://generativelanguage.googleapis.com/v1beta/interactions")
    assert request.headers["x-goog-api-key"] == "AIza-secret"
    assert "authorization" not in request.headers
    assert json.loads(request.body) == {
        "model": "gemini-2.5-flash", "system_instruction": "Be brief.",
        "previous_interaction_id": "v1_abc",
        "input": [{"type": "user_input", "content": [{"type": "text", "text": "And tomorrow?"}]}],
        "tools": [TOOL_JSON], "generation_config": {"thinking_level": "low"},
        "store": True, "stream": True,
    }


def test_tool_continuation_sends_function_results() -> None:
    """After a tool iteration: function_result steps on the newest interaction."""
    results = (ToolResultPart(call_id="a1", name="getWeather", output="sunny"),
               ToolResultPart(call_id="b2", name="getWeather", output="boom", is_error=True))
    sent = body(call(cursor="v1_newest", tool_results=results, iteration=1))
    assert sent["previous_interaction_id"] == "v1_newest"
    assert sent["input"] == [
        {"type": "function_result", "name": "getWeather", "call_id": "a1", "result": "sunny",
         "is_error": False},
        {"type": "function_result", "name": "getWeather", "call_id": "b2", "result": "boom",
         "is_error": True},
    ]
    assert sent["system_instruction"] == "Be brief." and sent["tools"] == [TOOL_JSON]


def test_replay_renders_history_as_steps() -> None:
    """Replay: user_input, thought (signature only), model_output, function_call with an
    arguments object and its signature, function_result, joined text."""
    sent = body(call(strategy=Strategy.REPLAY, history=HISTORY, user_text="Thanks"))
    assert "previous_interaction_id" not in sent
    assert sent["input"] == [
        {"type": "user_input", "content": [{"type": "text", "text": "Weather in SF?"}]},
        {"type": "thought", "signature": "sig-thought"},
        {"type": "model_output", "content": [{"type": "text", "text": "Checking."}]},
        {"type": "function_call", "id": "61nzpsv4", "name": "getWeather",
         "arguments": {"location": "San Francisco"}, "signature": "sig-call"},
        {"type": "function_result", "name": "getWeather", "call_id": "61nzpsv4",
         "result": "27C sunny", "is_error": False},
        {"type": "model_output", "content": [{"type": "text", "text": "It is sunny."}]},
        {"type": "user_input", "content": [{"type": "text", "text": "Thanks"}]},
    ]


def test_signatures_go_only_to_the_model_that_made_them() -> None:
    """Another model (or another provider's artefacts) gets no thoughts and no signatures."""
    other = DEFAULT_REGISTRY.model("gemini", "gemini-2.5-pro")
    sent = body(call(strategy=Strategy.REPLAY, model=other, history=HISTORY, user_text="x"))
    types = [step["type"] for step in sent["input"]]
    assert "thought" not in types
    assert all("signature" not in step for step in sent["input"])
    foreign = (message(1, Role.USER, TextPart(text="q")), message(2, Role.ASSISTANT,
               ReasoningPart(provider="anthropic", model="gemini-2.5-flash", kind="thinking",
                             signature="s"), TextPart(text="a")))
    sent = body(call(strategy=Strategy.REPLAY, history=foreign, user_text="x"))
    assert [step["type"] for step in sent["input"]] == ["user_input", "model_output",
                                                        "user_input"]


@pytest.mark.parametrize("arguments, expected", [
    ('{"a": 1}', {"a": 1}), ("", {}), ("[1, 2]", {"arguments": [1, 2]}),
    ("not json", {"arguments": "not json"}),
])
def test_call_arguments_become_an_object(arguments: str, expected: Any) -> None:
    """Interactions wants an arguments object; odd text is wrapped, never dropped."""
    history = (message(1, Role.USER, TextPart(text="q")), message(
        2, Role.ASSISTANT, ToolCallPart(call_id="c", name="t", arguments=arguments),
        ToolResultPart(call_id="c", name="t", output="o")))
    sent = body(call(strategy=Strategy.REPLAY, history=history, user_text="x"))
    assert sent["input"][1]["arguments"] == expected


def test_optional_fields_are_left_out() -> None:
    """No prompt, tools, generation config or key: none of their fields or headers."""
    request = GeminiInteractionsAdapter().build_request(call(system_prompt="", tools=(),
                                                             user_text="hi"))
    sent = json.loads(request.body)
    assert set(sent) == {"model", "input", "store", "stream"}
    assert "x-goog-api-key" not in request.headers


def test_a_tool_continuation_needs_a_cursor() -> None:
    """Tool results without the newest interaction id are a driver bug."""
    results = (ToolResultPart(call_id="c", name="t", output="o"),)
    with pytest.raises(ConfigurationError):
        ADAPTER.build_request(call(strategy=Strategy.REPLAY, tool_results=results))


def test_the_key_stays_out_of_reprs() -> None:
    """Neither the adapter nor its request prints the API key."""
    assert "AIza-secret" not in repr(ADAPTER)
    assert "AIza-secret" not in repr(ADAPTER.build_request(call(cursor="v1_x")))


def test_envelope_names_the_interaction() -> None:
    """Mode interactions, cursor = the interaction id, createdAt and coversSeq."""
    ctx = TurnContext(provider="gemini", model_name="gemini-2.5-flash", system_prompt_hash="a",
                      toolset_hash="b", committed_seq=2, now=NOW)
    response = ProviderResponse(response_id="v1_next", parts=())
    envelope = ADAPTER.envelope(ctx, response, loop_messages=(), now=NOW, covers_seq=4)
    assert envelope.mode is Mode.INTERACTIONS and envelope.cursor == "v1_next"
    assert envelope.created_at == NOW and envelope.covers_seq == 4
    assert parse_envelope(serialize_envelope(envelope)) == envelope
    assert ADAPTER.extend_loop(call(), response, ()) == () and ADAPTER.provider == "gemini"


# --- error classification ------------------------------------------------------------


def http(http_status: int, code: Any, message: str, **extra: Any) -> Any:
    error = {"code": code, "message": message, **extra}
    return ADAPTER.classify_error(http_status, {}, json.dumps({"error": error}).encode())


def test_unknown_interaction_is_cursor_expired() -> None:
    """404 not_found naming the interaction (what the emulator sends)."""
    error = http(404, "not_found",
                 "Previous interaction with id 'v1_x' was not found or has expired.")
    assert isinstance(error, CursorRejected) and error.reason == "cursor_expired"
    assert error.status == 404 and error.code == "not_found"
    plain = http(404, "not_found", "Interaction v1_x not found.")
    assert isinstance(plain, CursorRejected) and plain.reason == "cursor_expired"


def test_expired_message_on_a_400_is_cursor_expired() -> None:
    """A 400 whose message says the previous interaction expired."""
    error = http(400, "invalid_argument", "The previous_interaction_id has expired.")
    assert isinstance(error, CursorRejected) and error.reason == "cursor_expired"


def test_malformed_interaction_id_is_cursor_invalid() -> None:
    """400 invalid_argument naming previous_interaction_id."""
    error = http(400, "invalid_argument", "Invalid value for previous_interaction_id: 'abc'.")
    assert isinstance(error, CursorRejected) and error.reason == "cursor_invalid"


def test_other_404s_are_not_cursor_errors() -> None:
    """An unknown model is fatal, not a cursor problem."""
    error = http(404, "not_found", "models/gemini-9 is not found for API version v1beta.")
    assert type(error) is FatalProviderError


def test_classic_error_shape_is_read() -> None:
    """``{"code": 429, "status": "RESOURCE_EXHAUSTED"}`` (generateContent style)."""
    error = http(429, 429, "Quota exceeded.", status="RESOURCE_EXHAUSTED")
    assert isinstance(error, RateLimited) and error.code == "RESOURCE_EXHAUSTED"


def test_tool_pairing_is_a_logged_bug(caplog: pytest.LogCaptureFixture) -> None:
    """The emulator's pairing complaint is fatal and logged at ERROR."""
    with caplog.at_level(logging.ERROR, logger="turnstate"):
        error = http(400, "invalid_argument", "No tool output found for function call abc.")
    assert type(error) is FatalProviderError
    assert "No tool output found" in caplog.text


def test_generic_statuses_and_stream_codes() -> None:
    """5xx transient, 403 fatal; in-stream gateway_timeout transient, unknown codes fatal."""
    assert type(http(503, "unavailable", "The model is overloaded.")) is TransientProviderError
    assert type(http(403, "permission_denied", "no")) is FatalProviderError
    assert type(classify_fields(None, {}, {"code": "gateway_timeout", "message": "m"})) \
        is TransientProviderError
    assert type(classify_fields(None, {}, {"code": "safety", "message": "m"})) \
        is FatalProviderError


def test_recovery_replay_appends_this_turns_calls_and_results() -> None:
    """A recovering replay sends the user's text, then this turn's calls and results as
    steps; signatures go back only to the model that made them."""
    turn = HISTORY[1].parts
    sent = body(call(strategy=Strategy.REPLAY, history=HISTORY[:1], user_text="Again?",
                     turn_parts=turn))
    assert [s["type"] for s in sent["input"]] == [
        "user_input", "user_input", "thought", "model_output", "function_call",
        "function_result", "model_output"]
    assert "previous_interaction_id" not in sent
    assert sent["input"][4]["signature"] == "sig-call"
    other = DEFAULT_REGISTRY.model("gemini", "gemini-2.5-pro")
    sent = body(call(strategy=Strategy.REPLAY, model=other, user_text="x", turn_parts=turn))
    assert all("signature" not in step for step in sent["input"])
