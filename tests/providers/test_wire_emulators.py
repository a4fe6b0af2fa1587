"""What the emulators stream and enforce for issue 24's items 2, 3 and 6, straight over
HTTP (the engine's turns over the same shapes are in tests/engine/test_wire_loopback.py).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from turnstate.core._json import JsonObject
from turnstate.emulators import (
    AnthropicEmulator,
    ChatCompletionsEmulator,
    DeepSeekEmulator,
    EmulatorServer,
    Reply,
    ScriptedCall,
)
from turnstate.emulators._chat_dialects import GEMINI_OPENAI, OPENAI, REASONING_FIELD, dialect_of
from turnstate.providers._sse import SseDecoder

OSLO = ScriptedCall(name="weather", arguments='{"city": "Oslo"}')
WEATHER_TOOL = {"name": "weather", "input_schema": {
    "type": "object", "properties": {"city": {"type": "string"}}}}
CHAT_TOOL = {"type": "function", "function": {"name": "weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}}}}


async def post(emulator: Any, path: str, body: JsonObject) -> tuple[int, Any]:
    """The status and the decoded body (a list of SSE data objects for a stream)."""
    async with EmulatorServer(emulator) as server, aiohttp.ClientSession() as session, \
            session.post(server.base_url + path, json=body) as response:
        raw = await response.read()
    if response.status != 200 or not body.get("stream"):
        return response.status, json.loads(raw)
    events = [e.data for e in SseDecoder().feed(raw) if e.data != "[DONE]"]
    return 200, [json.loads(data) for data in events]


@pytest.fixture
async def anthropic() -> AsyncIterator[AnthropicEmulator]:
    yield AnthropicEmulator()


def anthropic_body(*messages: JsonObject) -> JsonObject:
    return {"model": "claude-sonnet-4-5", "max_tokens": 64, "stream": True,
            "tools": [WEATHER_TOOL], "messages": list(messages)}


# --- item 2 -------------------------------------------------------------------------------


async def test_anthropic_stops_inside_a_tool_call_and_counts_it_incomplete(
    anthropic: AnthropicEmulator,
) -> None:
    anthropic.model.push(Reply(text="Looking.", calls=(OSLO,), truncated=True,
                               partial_call=True))
    ask = {"role": "user", "content": "weather?"}
    status, events = await post(anthropic, "/v1/messages", anthropic_body(ask))
    assert status == 200
    (cut,) = anthropic.incomplete
    partial = "".join(e["delta"]["partial_json"] for e in events
                      if e["type"] == "content_block_delta"
                      and e["delta"]["type"] == "input_json_delta")
    assert partial and not _parses(partial)
    stop = next(e for e in events if e["type"] == "message_delta")
    assert stop["delta"]["stop_reason"] == "max_tokens"
    use = {"type": "tool_use", "id": cut, "name": "weather", "input": {}}
    result = {"type": "tool_result", "tool_use_id": cut, "content": "sunny"}
    replayed = {"role": "assistant", "content": [{"type": "text", "text": "Looking."}, use]}
    status, body = await post(anthropic, "/v1/messages", anthropic_body(
        ask, replayed, {"role": "user", "content": [result]}))
    assert status == 400
    assert "unexpected `tool_use_id` found in `tool_result` blocks" in body["error"]["message"]
    status, body = await post(anthropic, "/v1/messages", anthropic_body(
        ask, replayed, {"role": "user", "content": "go on"}))
    assert status == 400 and "without `tool_result` blocks" in body["error"]["message"]
    text_only = {"role": "assistant", "content": [{"type": "text", "text": "Looking."}]}
    status, _ = await post(anthropic, "/v1/messages", anthropic_body(
        ask, text_only, {"role": "user", "content": "go on"}))
    assert status == 200


def _parses(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


async def test_claude_4_refuses_temperature_with_top_p(anthropic: AnthropicEmulator) -> None:
    ask = {"role": "user", "content": "hi"}
    for model, expected in (("claude-sonnet-4-5", 400), ("claude-opus-4-1-20250805", 400),
                            ("claude-3-5-haiku", 200)):
        body = {**anthropic_body(ask), "model": model, "temperature": 0.5, "top_p": 0.9}
        status, answer = await post(anthropic, "/v1/messages", body)
        assert status == expected, model
        if expected == 400:
            assert "cannot both be specified" in answer["error"]["message"]
    one = {**anthropic_body(ask), "temperature": 0.5}
    assert (await post(anthropic, "/v1/messages", one))[0] == 200


# --- item 3 -------------------------------------------------------------------------------


def test_dialects_by_model_name() -> None:
    table = ChatCompletionsEmulator().dialects
    assert dialect_of("gemini-2.5-flash", table) is GEMINI_OPENAI
    assert dialect_of("openai/gpt-oss-120b", table) is REASONING_FIELD
    assert dialect_of("gpt-oss-20b", table) is REASONING_FIELD
    assert dialect_of("gpt-4o", table) is OPENAI


def chat_body(model: str, *messages: JsonObject, stream: bool = True) -> JsonObject:
    return {"model": model, "stream": stream, "tools": [CHAT_TOOL],
            "messages": [{"role": "user", "content": "weather?"}, *messages]}


async def test_gemini_dialect_streams_calls_without_id_or_index() -> None:
    emulator = ChatCompletionsEmulator()
    emulator.model.push(Reply(text="", calls=(OSLO, OSLO)))
    status, chunks = await post(emulator, "/v1/chat/completions", chat_body("gemini-2.5-flash"))
    assert status == 200
    calls = [c for chunk in chunks for choice in chunk["choices"]
             for c in choice["delta"].get("tool_calls", ())]
    assert calls == [{"id": "", "type": "function", "function": {
        "name": "weather", "arguments": '{"city": "Oslo"}'}}] * 2


def call_message(call_id: str) -> JsonObject:
    return {"role": "assistant", "content": None, "tool_calls": [
        {"id": call_id, "type": "function",
         "function": {"name": "weather", "arguments": "{}"}}]}


@pytest.mark.parametrize("emulator_class", [ChatCompletionsEmulator, DeepSeekEmulator])
@pytest.mark.parametrize(("call_id", "result_id", "param"), [
    ("", "", "messages[1].tool_calls[0].id"),
    ("call_ts0_a", "", "messages[2].tool_call_id"),
    ("call_ts0_a", "call_ts0_b", None),
])
async def test_replayed_call_ids_must_be_set_and_match(
    emulator_class: type[ChatCompletionsEmulator], call_id: str, result_id: str,
    param: str | None,
) -> None:
    body = chat_body("gemini-2.5-flash" if emulator_class is ChatCompletionsEmulator
                     else "deepseek-chat", call_message(call_id),
                     {"role": "tool", "tool_call_id": result_id, "content": "sunny"})
    status, error = await post(emulator_class(), emulator_class.ROUTES[0], body)
    assert status == 400
    message = error["error"]["message"]
    if param is None:
        assert message.startswith("Messages with role 'tool' must be a response")
    else:
        assert message.startswith(f"Invalid '{param}': empty string.")
        assert error["error"]["code"] in ("empty_string", "invalid_request_error")


async def test_matching_synthetic_ids_are_accepted() -> None:
    body = chat_body("gemini-2.5-flash", call_message("call_ts0_a"),
                     {"role": "tool", "tool_call_id": "call_ts0_a", "content": "sunny"})
    status, _ = await post(ChatCompletionsEmulator(), "/v1/chat/completions", body)
    assert status == 200


# --- item 6 -------------------------------------------------------------------------------


async def test_reasoning_dialect_streams_delta_reasoning() -> None:
    emulator = ChatCompletionsEmulator()
    emulator.model.push(*[Reply(text="Hi.", reasoning="The user greets.")] * 2)
    status, chunks = await post(emulator, "/v1/chat/completions",
                                chat_body("openai/gpt-oss-120b"))
    deltas = [choice["delta"] for chunk in chunks for choice in chunk["choices"]]
    assert status == 200
    assert "".join(d.get("reasoning", "") for d in deltas) == "The user greets."
    assert not any("reasoning_content" in d for d in deltas)
    status, body = await post(emulator, "/v1/chat/completions",
                              chat_body("openai/gpt-oss-120b", stream=False))
    assert status == 200 and body["choices"][0]["message"]["reasoning"] == "The user greets."


async def test_openai_dialect_streams_no_reasoning() -> None:
    emulator = ChatCompletionsEmulator()
    emulator.model.push(Reply(text="Hi.", reasoning="The user greets."))
    _, chunks = await post(emulator, "/v1/chat/completions", chat_body("gpt-4o"))
    deltas = [choice["delta"] for chunk in chunks for choice in chunk["choices"]]
    assert not any({"reasoning", "reasoning_content"} & d.keys() for d in deltas)


async def test_reasoning_dialect_refuses_reasoning_content_sent_back() -> None:
    answered = {"role": "assistant", "content": "Hi.", "reasoning_content": "The user greets."}
    body = chat_body("openai/gpt-oss-120b", answered, {"role": "user", "content": "again"})
    status, error = await post(ChatCompletionsEmulator(), "/v1/chat/completions", body)
    assert status == 400
    assert error["error"]["message"] == (
        "'messages.1' : for 'role:assistant' the following must be satisfied"
        "[('messages.1' : property 'reasoning_content' is unsupported)]")
