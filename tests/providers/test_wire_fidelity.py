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
from turnstate.core._registry import DEFAULT_REGISTRY, ModelInfo
from turnstate.providers._protocol import ProviderCall, ReasoningDelta, SseEvent, TextDelta
from turnstate.providers.chat_completions import ChatCompletionsAdapter
from turnstate.providers.deepseek import DeepSeekAdapter

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
