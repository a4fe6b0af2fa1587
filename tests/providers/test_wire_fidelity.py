"""Wire fidelity, round three (issue 24): stream shapes other projects' live traffic
showed, each hand-written here from the provider's documentation and the shape the
issue describes.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.providers.support import message, request_json
from turnstate.core._conversation import (
    ReasoningPart,
    Role,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    ToolSpec,
)
from turnstate.core._decisions import Strategy
from turnstate.core._errors import FatalProviderError
from turnstate.core._registry import DEFAULT_REGISTRY, ModelInfo
from turnstate.providers._protocol import ProviderCall, ReasoningDelta, SseEvent, TextDelta
from turnstate.providers.anthropic import AnthropicAdapter
from turnstate.providers.chat_completions import ChatCompletionsAdapter
from turnstate.providers.deepseek import DeepSeekAdapter
from turnstate.providers.gemini_interactions import InteractionsStreamParser
from turnstate.providers.openai_responses import OpenAIResponsesAdapter, ResponsesStreamParser

WEATHER = ToolSpec(name="weather", parameters={"type": "object", "properties": {
    "city": {"type": "string"}}})


def sse(payload: object) -> SseEvent:
    return SseEvent(data=payload if isinstance(payload, str) else json.dumps(payload))


def chat_chunk(delta: dict[str, Any], *, finish: str | None = None, model: str = "m",
               usage: dict[str, Any] | None = None) -> SseEvent:
    return sse({"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
                "usage": usage})


def feed_all(parser: Any, events: list[SseEvent]) -> list[object]:
    out: list[object] = []
    for event in events:
        out.extend(parser.feed(event))
    return out


def loop_call(model: ModelInfo, **changes: Any) -> ProviderCall:
    fields: dict[str, Any] = {"strategy": Strategy.LOCAL_LOOP, "model": model,
                              "system_prompt": "sys", "tools": (WEATHER,), "user_text": "go"}
    return ProviderCall(**{**fields, **changes})


# --- item 1: DeepSeek reasoning under another model name ------------------------------


def deepseek_tool_stream(model: str) -> list[SseEvent]:
    """A thinking tool call as DeepSeek streams it (thinking_mode guide), answered under
    ``model``: reasoning pieces, the call, then finish_reason and usage on one chunk."""
    return [
        chat_chunk({"role": "assistant", "content": None, "reasoning_content": ""}, model=model),
        chat_chunk({"content": None, "reasoning_content": "Need the weather "}, model=model),
        chat_chunk({"content": None, "reasoning_content": "for Oslo."}, model=model),
        chat_chunk({"tool_calls": [{"index": 0, "id": "call_00_a", "type": "function",
                                    "function": {"name": "weather", "arguments": ""}}]},
                   model=model),
        chat_chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"city":"Oslo"}'}}]},
                   model=model),
        chat_chunk({"content": "", "reasoning_content": None}, finish="tool_calls", model=model,
                   usage={"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}),
    ]


@pytest.mark.parametrize(("configured", "returned"), [
    ("deepseek-reasoner", "deepseek-v4-flash"),
    ("deepseek-reasoner-2026-01-01", "deepseek-reasoner-2026-01-01"),
    ("deepseek-v4-flash-0701", "deepseek-v4-flash-0701"),
    ("deepseek-v4-flash", "deepseek-v4-flash-0701"),
])
def test_deepseek_loop_reasoning_goes_back_whatever_the_model_name(
    configured: str, returned: str
) -> None:
    """Item 1: reasoning made in this turn's loop is sent back in this turn's loop,
    whatever name the response carried; dated names think and replay like their model."""
    adapter = DeepSeekAdapter()
    model = DEFAULT_REGISTRY.model("deepseek", configured)
    assert model.thinking
    call = loop_call(model)
    assert request_json(adapter, call)["thinking"] == {"type": "enabled"}
    parser = adapter.stream_parser()
    feed_all(parser, deepseek_tool_stream(returned))
    response = parser.finish()
    results = [ToolResultPart(call_id="call_00_a", name="weather", output="cold")]
    loop = adapter.extend_loop(call, response, results)
    assert loop[0]["reasoning_content"] == "Need the weather for Oslo."
    # ... and in the next user turn too (V4: tool-turn reasoning in all later requests).
    history = (message(1, Role.USER, TextPart(text="go")),
               message(2, Role.ASSISTANT, *response.parts, *results, TextPart(text="Cold.")))
    messages = request_json(adapter, loop_call(model, history=history))["messages"]
    assert messages[2]["reasoning_content"] == "Need the weather for Oslo."


# --- item 3: a Chat Completions tool call with an empty id and no index ---------------


def gemini_compat_stream() -> list[SseEvent]:
    """Gemini's OpenAI-compatible endpoint: text, then each call whole in one chunk with
    ``"id": ""`` and no ``index``, ``finish_reason: tool_calls`` and ``[DONE]``."""
    return [
        chat_chunk({"role": "assistant", "content": "Checking both."}),
        chat_chunk({"tool_calls": [{"id": "", "type": "function", "function": {
            "name": "weather", "arguments": '{"city":"Oslo"}'}}]}),
        chat_chunk({"tool_calls": [{"id": "", "type": "function", "function": {
            "name": "weather", "arguments": '{"city":"Rome"}'}}]}),
        chat_chunk({}, finish="tool_calls",
                   usage={"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7}),
        sse("[DONE]"),
    ]


def test_call_with_empty_id_and_no_index_gets_a_stable_unique_id() -> None:
    """Item 3: the text and both calls are kept; each call gets a synthetic id, unique
    in the response and the same every time the stream is parsed."""
    def parse() -> Any:
        parser = ChatCompletionsAdapter().stream_parser()
        deltas = feed_all(parser, gemini_compat_stream())
        return parser.finish(), deltas

    response, deltas = parse()
    assert deltas == [TextDelta(text="Checking both.")]
    assert response.parts[0] == TextPart(text="Checking both.")
    first, second = response.tool_calls
    assert (first.arguments, second.arguments) == ('{"city":"Oslo"}', '{"city":"Rome"}')
    assert first.call_id and second.call_id and first.call_id != second.call_id
    assert [c.call_id for c in parse()[0].tool_calls] == [first.call_id, second.call_id]
    assert response.finish_reason == "tool_calls" and response.raw_finish_reason == "tool_calls"


def test_parallel_calls_in_one_chunk_without_index() -> None:
    """Item 3: two calls in one chunk's list, no index, empty ids: two calls."""
    parser = ChatCompletionsAdapter().stream_parser()
    feed_all(parser, [chat_chunk({"tool_calls": [
        {"id": "", "type": "function", "function": {"name": "a", "arguments": "{}"}},
        {"id": "", "type": "function", "function": {"name": "b", "arguments": "{}"}}]},
        finish="tool_calls"), sse("[DONE]")])
    calls = parser.finish().tool_calls
    assert [c.name for c in calls] == ["a", "b"] and calls[0].call_id != calls[1].call_id


# --- item 6: delta.reasoning (OpenRouter, Groq, gpt-oss) --------------------------------


def reasoning_field_stream() -> list[SseEvent]:
    """OpenRouter's reasoning-tokens shape: ``delta.reasoning`` pieces, then content."""
    return [
        chat_chunk({"role": "assistant", "content": "", "reasoning": "The user greets; "}),
        chat_chunk({"content": "", "reasoning": "answer briefly."}),
        chat_chunk({"content": "Hello!"}),
        chat_chunk({}, finish="stop"),
        sse("[DONE]"),
    ]


def test_delta_reasoning_streams_and_is_kept() -> None:
    """Item 6: ``delta.reasoning`` is a reasoning delta and a stored reasoning part."""
    parser = ChatCompletionsAdapter().stream_parser()
    deltas = feed_all(parser, reasoning_field_stream())
    assert deltas == [ReasoningDelta(text="The user greets; "),
                      ReasoningDelta(text="answer briefly."), TextDelta(text="Hello!")]
    reasoning, text = parser.finish().parts
    assert isinstance(reasoning, ReasoningPart) and reasoning.kind == "reasoning"
    assert reasoning.text == "The user greets; answer briefly."
    assert text == TextPart(text="Hello!")


def test_delta_reasoning_is_not_replayed_by_the_generic_codec() -> None:
    """Item 6: the generic OpenAI-compatible codec sends no reasoning back (OpenAI's
    Chat Completions message params have no reasoning field; OpenRouter's and Groq's
    docs do not ask for the text back), in the loop or the history."""
    adapter = ChatCompletionsAdapter()
    model = DEFAULT_REGISTRY.model("openai-compatible", "gpt-oss-120b")
    parser = adapter.stream_parser()
    feed_all(parser, [chat_chunk({"reasoning": "think"}),
                      chat_chunk({"tool_calls": [{"index": 0, "id": "c1", "function": {
                          "name": "weather", "arguments": "{}"}}]}, finish="tool_calls"),
                      sse("[DONE]")])
    response = parser.finish()
    loop = adapter.extend_loop(loop_call(model), response,
                               [ToolResultPart(call_id="c1", name="weather", output="x")])
    assert "reasoning" not in json.dumps(loop)
    call = ToolCallPart(call_id="c1", name="weather", arguments="{}",
                        provider="openai-compatible", model="gpt-oss-120b")
    history = (message(1, Role.USER, TextPart(text="q")),
               message(2, Role.ASSISTANT, response.parts[0], call, TextPart(text="a")))
    body = request_json(adapter, loop_call(model, history=history))
    assert "reasoning" not in json.dumps(body["messages"])


# --- item 2: Anthropic max_tokens inside a tool call ------------------------------------


def anthropic_event(kind: str, **fields: Any) -> SseEvent:
    return SseEvent(event=kind, data=json.dumps({"type": kind, **fields}))


def anthropic_cut_stream() -> list[SseEvent]:
    """Messages streaming (docs: "Streaming Messages"): text, then a tool_use whose
    input_json_delta stops mid-object; the limit ends it with stop_reason max_tokens."""
    return [
        anthropic_event("message_start", message={
            "id": "msg_cut1", "type": "message", "role": "assistant",
            "model": "claude-sonnet-4-5-20250929", "content": [], "stop_reason": None,
            "usage": {"input_tokens": 20, "output_tokens": 1}}),
        anthropic_event("content_block_start", index=0,
                        content_block={"type": "text", "text": ""}),
        anthropic_event("content_block_delta", index=0,
                        delta={"type": "text_delta", "text": "Let me look that up."}),
        anthropic_event("content_block_stop", index=0),
        anthropic_event("content_block_start", index=1, content_block={
            "type": "tool_use", "id": "toolu_cut1", "name": "weather", "input": {}}),
        anthropic_event("content_block_delta", index=1,
                        delta={"type": "input_json_delta", "partial_json": '{"city": "Os'}),
        anthropic_event("content_block_stop", index=1),
        anthropic_event("message_delta", delta={"stop_reason": "max_tokens",
                                                "stop_sequence": None},
                        usage={"output_tokens": 16}),
        anthropic_event("message_stop"),
    ]


def test_anthropic_max_tokens_inside_a_tool_call_keeps_the_text() -> None:
    """Item 2: the text is kept, the cut call dropped and recorded, finish ``length``."""
    parser = AnthropicAdapter(api_key="k").stream_parser()
    deltas = feed_all(parser, anthropic_cut_stream())
    response = parser.finish()
    assert deltas == [TextDelta(text="Let me look that up.")]
    assert response.parts == (TextPart(text="Let me look that up."),)
    assert response.tool_calls == ()
    assert response.finish_reason == "length" and response.raw_finish_reason == "max_tokens"
    assert response.metadata["droppedToolCalls"] == [
        {"id": "toolu_cut1", "name": "weather", "reason": "max_tokens"}]


def test_anthropic_max_tokens_after_a_whole_call_drops_only_the_last() -> None:
    """Item 2: a complete call before the cut one is kept; the last block is the cut one
    even when its partial input happens to parse."""
    stream = anthropic_cut_stream()
    whole = [anthropic_event("content_block_start", index=2, content_block={
        "type": "tool_use", "id": "toolu_cut2", "name": "weather", "input": {}}),
        anthropic_event("content_block_delta", index=2,
                        delta={"type": "input_json_delta", "partial_json": "{}"}),
        anthropic_event("content_block_stop", index=2)]
    fixed = anthropic_event("content_block_delta", index=1, delta={
        "type": "input_json_delta", "partial_json": 'lo"}'})
    parser = AnthropicAdapter(api_key="k").stream_parser()
    feed_all(parser, [*stream[:6], fixed, stream[6], *whole, *stream[7:]])
    response = parser.finish()
    assert [c.call_id for c in response.tool_calls] == ["toolu_cut1"]
    assert response.metadata["droppedToolCalls"][0]["id"] == "toolu_cut2"


# --- raw finish reasons on every parser -------------------------------------------------


def test_every_parser_keeps_the_raw_finish_reason() -> None:
    """Normalised and raw finish reasons side by side (Responses, Interactions)."""
    responses = ResponsesStreamParser()
    feed_all(responses, [sse({"type": "response.completed", "response": {
        "id": "resp_1", "status": "incomplete", "model": "gpt-5",
        "incomplete_details": {"reason": "max_output_tokens"}, "output": []}})])
    done = responses.finish()
    assert (done.finish_reason, done.raw_finish_reason) == ("length", "max_output_tokens")
    gemini = InteractionsStreamParser()
    feed_all(gemini, [sse({"event_type": "interaction.completed", "interaction": {
        "id": "v1_1", "status": "requires_action", "model": "gemini-2.5-flash"}})])
    done = gemini.finish()
    assert (done.finish_reason, done.raw_finish_reason) == ("tool_calls", "requires_action")


# --- item 8: quota and billing errors ---------------------------------------------------


QUOTA_BODY = json.dumps({"error": {
    "message": "You exceeded your current quota, please check your plan and billing details.",
    "type": "insufficient_quota", "param": None, "code": "insufficient_quota"}}).encode()


@pytest.mark.parametrize("adapter_name", ["openai", "openai-compatible", "deepseek"])
def test_insufficient_quota_429_is_fatal(adapter_name: str) -> None:
    """Item 8: OpenAI's 429 ``insufficient_quota`` is fatal (never retried) at HTTP
    level, as it already was inside a stream."""
    adapters = {"openai": OpenAIResponsesAdapter(api_key="k"),
                "openai-compatible": ChatCompletionsAdapter(api_key="k"),
                "deepseek": DeepSeekAdapter(api_key="k")}
    error = adapters[adapter_name].classify_error(429, {"retry-after": "1"}, QUOTA_BODY)
    assert isinstance(error, FatalProviderError) and not error.retryable
    assert error.code == "insufficient_quota"


def test_quota_errors_inside_streams_are_fatal() -> None:
    """Item 8: the same code inside a 200 stream is fatal for every stream parser."""
    chat = ChatCompletionsAdapter().stream_parser()
    with pytest.raises(FatalProviderError):
        chat.feed(sse({"error": {"message": "quota", "type": "insufficient_quota",
                                 "code": 429}}))
    with pytest.raises(FatalProviderError):
        ResponsesStreamParser().feed(sse({"type": "error", "code": "insufficient_quota",
                                          "message": "quota", "param": None}))
