"""Chat Completions: a tool call id longer than OpenAI's 40 characters is sent shortened.

OpenAI refuses ``tool_calls[].id`` (and ``tool_call_id``) past 40 characters: "Invalid
'messages[2].tool_calls[0].id': string too long. Expected a string with maximum
length 40, but got a string with length 46 instead." (400, code
``string_above_max_length``; agno-agi/agno#5382, openclaw/openclaw PR 875,
Portkey-AI/gateway#1062). Other servers mint longer ids: vLLM names every call
``chatcmpl-tool-`` plus 32 hex digits (46 characters). The codec sent a stored id as it
was, so a chat that ran tools on such a server could not go on against OpenAI's
endpoint: every request replays that id.
"""

from __future__ import annotations

from typing import Any

import aiohttp

from tests.providers.support import message as msg
from tests.providers.support import request_json
from turnstate.core._conversation import Role, TextPart, ToolCallPart, ToolResultPart, ToolSpec
from turnstate.core._decisions import Strategy
from turnstate.core._registry import DEFAULT_REGISTRY
from turnstate.emulators import ChatCompletionsEmulator, EmulatorServer
from turnstate.providers._protocol import ProviderCall
from turnstate.providers.chat_completions import ChatCompletionsAdapter

MODEL = DEFAULT_REGISTRY.model("openai-compatible", "gpt-4o")
WEATHER = ToolSpec(name="weather", parameters={"type": "object", "properties": {}})
VLLM_ID = "chatcmpl-tool-3f1c2b9e8d7a4c6b9e0f1a2b3c4d5e6f"


def call_with(*ids: str) -> ProviderCall:
    calls = [ToolCallPart(call_id=i, name="weather", arguments="{}",
                          provider="openai-compatible", model="Qwen/Qwen3-8B") for i in ids]
    results = [ToolResultPart(call_id=i, name="weather", output="4C") for i in ids]
    history = (msg(1, Role.USER, TextPart(text="weather?")),
               msg(2, Role.ASSISTANT, *calls, *results, TextPart(text="4C.")))
    return ProviderCall(strategy=Strategy.LOCAL_LOOP, model=MODEL, system_prompt="",
                        tools=(WEATHER,), history=history, user_text="next")


def ids_of(body: dict[str, Any]) -> tuple[list[str], list[str]]:
    calls = [c["id"] for m in body["messages"] for c in m.get("tool_calls") or ()]
    results = [m["tool_call_id"] for m in body["messages"] if m["role"] == "tool"]
    return calls, results


def test_a_long_id_is_shortened_the_same_for_the_call_and_its_result() -> None:
    other = VLLM_ID[:-1] + "0"
    calls, results = ids_of(request_json(ChatCompletionsAdapter(), call_with(VLLM_ID, other)))
    assert all(len(i) <= 40 for i in calls), calls
    assert calls == results and len(set(calls)) == 2
    again, _ = ids_of(request_json(ChatCompletionsAdapter(), call_with(VLLM_ID, other)))
    assert again == calls  # the same bytes every request


def test_ids_within_the_limit_are_sent_as_they_are() -> None:
    ids = ("call_79382389", "toolu_01A09q90qw90lq917835lq9", "x" * 40)
    assert ids_of(request_json(ChatCompletionsAdapter(), call_with(*ids))) == (list(ids),
                                                                              list(ids))


async def test_the_emulator_refuses_a_long_id_and_takes_the_codecs_request() -> None:
    async with EmulatorServer(ChatCompletionsEmulator()) as server, \
            aiohttp.ClientSession() as session:
        base = server.base_url + ChatCompletionsEmulator.API_PREFIX
        body = {"model": "gpt-4o", "messages": [
            {"role": "user", "content": "weather?"},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": VLLM_ID, "type": "function",
                 "function": {"name": "weather", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": VLLM_ID, "content": "4C"}]}
        async with session.post(base + "/chat/completions", json=body,
                                headers={"authorization": "Bearer test-key"}) as response:
            assert response.status == 400
            error = (await response.json())["error"]
            assert error["code"] == "string_above_max_length"
            assert error["message"].startswith(
                "Invalid 'messages[1].tool_calls[0].id': string too long.")
        request = ChatCompletionsAdapter(base_url=base, api_key="test-key").build_request(
            call_with(VLLM_ID))
        async with session.post(request.url, data=request.body,
                                headers=dict(request.headers)) as response:
            assert response.status == 200
            await response.read()
