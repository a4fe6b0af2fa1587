"""The official ``openai`` SDK streams Chat Completions with tools against the Chat
Completions and DeepSeek emulators, over loopback."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import openai
import pytest

from turnstate.emulators import ChatCompletionsEmulator, DeepSeekEmulator, EmulatorServer

WEATHER: Any = {"type": "function", "function": {
    "name": "weather", "description": "Weather for a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}
ASK = "weather in two cities? [[call:weather*2]]"


async def _sdk(emulator: ChatCompletionsEmulator) -> AsyncIterator[openai.AsyncOpenAI]:
    async with EmulatorServer(emulator) as server:
        sdk = openai.AsyncOpenAI(base_url=server.base_url + emulator.API_PREFIX,
                                 api_key="test-key", max_retries=0)
        try:
            yield sdk
        finally:
            await sdk.close()


async def _stream_calls(sdk: openai.AsyncOpenAI, model: str,
                        messages: list[Any]) -> tuple[list[Any], dict[str, Any]]:
    """Stream one request; return the chunks and the assistant message they assemble."""
    stream = await sdk.chat.completions.create(
        model=model, messages=messages, tools=[WEATHER], stream=True,
        stream_options={"include_usage": True})
    chunks = [chunk async for chunk in stream]
    calls: dict[int, dict[str, Any]] = {}
    reasoning: list[str] = []
    for chunk in chunks:
        for choice in chunk.choices:
            reasoning.append((choice.delta.model_extra or {}).get("reasoning_content") or "")
            for call in choice.delta.tool_calls or []:
                entry = calls.setdefault(call.index, {"id": "", "type": "function", "function": {
                    "name": "", "arguments": ""}})
                entry["id"] = call.id or entry["id"]
                if call.function is not None:
                    entry["function"]["name"] += call.function.name or ""
                    entry["function"]["arguments"] += call.function.arguments or ""
    message = {"role": "assistant", "content": None,
               "tool_calls": [calls[index] for index in sorted(calls)]}
    return chunks, {**message, "reasoning_content": "".join(reasoning)}


def _results(assistant: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"role": "tool", "tool_call_id": call["id"], "content": "sunny"}
            for call in assistant["tool_calls"]]


@pytest.fixture
async def chat() -> AsyncIterator[tuple[openai.AsyncOpenAI, ChatCompletionsEmulator]]:
    emulator = ChatCompletionsEmulator()
    async for sdk in _sdk(emulator):
        yield sdk, emulator


@pytest.fixture
async def deepseek() -> AsyncIterator[tuple[openai.AsyncOpenAI, DeepSeekEmulator]]:
    emulator = DeepSeekEmulator()
    async for sdk in _sdk(emulator):
        yield sdk, emulator


async def test_sdk_streams_parallel_tool_calls_and_the_answer(
    chat: tuple[openai.AsyncOpenAI, ChatCompletionsEmulator],
) -> None:
    """Two streamed calls assemble by index; the usage chunk has no choices; the results
    sent back pair up and the SDK streams the final answer."""
    sdk, emulator = chat
    messages: list[Any] = [{"role": "user", "content": ASK}]
    chunks, assistant = await _stream_calls(sdk, "gpt-4o", messages)
    assert chunks[0].choices[0].delta.role == "assistant"
    assert chunks[-2].choices[0].finish_reason == "tool_calls"
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    assert chunks[-1].usage.prompt_tokens == emulator.usages[0]["prompt_tokens"]
    calls = assistant["tool_calls"]
    assert [c["function"]["name"] for c in calls] == ["weather", "weather"]
    assert [c["function"]["arguments"] for c in calls] == ['{"city":"city-value"}'] * 2
    assert calls[0]["id"] != calls[1]["id"]
    messages += [{key: assistant[key] for key in ("role", "content", "tool_calls")},
                 *_results(assistant)]
    stream = await sdk.chat.completions.create(model="gpt-4o", messages=messages,
                                               tools=[WEATHER], stream=True)
    text = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
    assert text == "Tool results: weather=sunny; weather=sunny."


async def test_sdk_sees_the_pairing_error(
    chat: tuple[openai.AsyncOpenAI, ChatCompletionsEmulator],
) -> None:
    """A tool message with no call before it is the API's 400, raised by the SDK."""
    sdk, _ = chat
    with pytest.raises(openai.BadRequestError, match="must be a response to a preceeding"):
        await sdk.chat.completions.create(model="gpt-4o", stream=True, messages=[
            {"role": "user", "content": "hi"},
            {"role": "tool", "tool_call_id": "call_x", "content": "sunny"}])


async def test_sdk_streams_deepseek_reasoning_tool_calls_and_cache_usage(
    deepseek: tuple[openai.AsyncOpenAI, DeepSeekEmulator],
) -> None:
    """DeepSeek's ``reasoning_content`` deltas reach the SDK as extra delta fields, usage
    (with cache hit and miss tokens) rides on the ``finish_reason`` chunk, and the tool
    loop completes when the reasoning is sent back."""
    sdk, emulator = deepseek
    messages: list[Any] = [{"role": "user", "content": ASK + " [[think]]"}]
    chunks, assistant = await _stream_calls(sdk, "deepseek-v4-flash", messages)
    assert assistant["reasoning_content"].startswith("Thinking about")
    finish = chunks[-1]
    assert finish.choices[0].finish_reason == "tool_calls" and finish.usage is not None
    extra = finish.usage.model_extra or {}
    assert extra["prompt_cache_hit_tokens"] + extra["prompt_cache_miss_tokens"] == \
        finish.usage.prompt_tokens
    assert len(assistant["tool_calls"]) == 2
    messages += [assistant, *_results(assistant)]
    stream = await sdk.chat.completions.create(model="deepseek-v4-flash", messages=messages,
                                               tools=[WEATHER], stream=True)
    later = [c async for c in stream]
    text = "".join(c.choices[0].delta.content or "" for c in later if c.choices)
    assert text == "Tool results: weather=sunny; weather=sunny."
    assert (later[-1].usage.model_extra or {})["prompt_cache_hit_tokens"] > 0
    assert emulator.requests[-1].path == "/chat/completions"


async def test_sdk_sees_deepseek_reasoning_rule(
    deepseek: tuple[openai.AsyncOpenAI, DeepSeekEmulator],
) -> None:
    """Dropping ``reasoning_content`` from a tool-call turn is DeepSeek's 400."""
    sdk, _ = deepseek
    messages: list[Any] = [{"role": "user", "content": ASK + " [[think]]"}]
    _, assistant = await _stream_calls(sdk, "deepseek-v4-flash", messages)
    del assistant["reasoning_content"]
    with pytest.raises(openai.BadRequestError, match="reasoning_content") as caught:
        await sdk.chat.completions.create(model="deepseek-v4-flash", stream=True, messages=[
            *messages, assistant, *_results(assistant)])
    assert caught.value.code == "invalid_request_error"
