"""Anthropic: tool call ids another provider made are sent in the form Anthropic takes.

Anthropic refuses a ``tool_use.id`` (and so its ``tool_result.tool_use_id``) outside
``^[a-zA-Z0-9_-]+$``: "messages.1.content.1.tool_use.id: String should match pattern
'^[a-zA-Z0-9_-]+$'" (400 ``invalid_request_error``; earendil-works/pi#9048,
OpenSecretCloud/maple-proxy#18). Other providers mint ids outside it: Kimi K2 on
OpenAI-compatible hosts names calls ``functions.write_todos:0`` (langchain-ai/langchain
PR 37756). A chat that ran tools on such a server and moved to Claude replays its history
with those ids, so every Anthropic request of the chat failed.
"""

from __future__ import annotations

import re
from typing import Any

import aiohttp

from tests.providers.support import message as msg
from tests.providers.support import request_json
from turnstate.core._conversation import Role, TextPart, ToolCallPart, ToolResultPart, ToolSpec
from turnstate.core._decisions import Strategy
from turnstate.core._registry import DEFAULT_REGISTRY
from turnstate.emulators import AnthropicEmulator, EmulatorServer
from turnstate.emulators._anthropic_checks import BAD_TOOL_ID
from turnstate.providers._protocol import ProviderCall
from turnstate.providers.anthropic import AnthropicAdapter

SONNET = DEFAULT_REGISTRY.model("anthropic", "claude-sonnet-4-5")
TODOS = ToolSpec(name="write_todos", parameters={"type": "object", "properties": {}})
PATTERN = re.compile(r"[a-zA-Z0-9_-]+")


def turn_with(*ids: str) -> tuple[Any, ...]:
    """A committed tool turn of an OpenAI-compatible server whose calls carry ``ids``."""
    calls = [ToolCallPart(call_id=i, name="write_todos", arguments="{}",
                          provider="openai-compatible", model="kimi-k2") for i in ids]
    results = [ToolResultPart(call_id=i, name="write_todos", output=f"done {i}") for i in ids]
    return (msg(1, Role.USER, TextPart(text="plan it")),
            msg(2, Role.ASSISTANT, *calls, *results, TextPart(text="Planned.")))


def body_for(*ids: str) -> dict[str, Any]:
    call = ProviderCall(strategy=Strategy.LOCAL_LOOP, model=SONNET, system_prompt="",
                        tools=(TODOS,), history=turn_with(*ids), user_text="next")
    decoded: dict[str, Any] = request_json(AnthropicAdapter(), call)
    return decoded


def pairs(body: dict[str, Any]) -> tuple[list[str], list[str]]:
    blocks = [b for m in body["messages"] for b in m["content"]]
    return ([b["id"] for b in blocks if b["type"] == "tool_use"],
            [b["tool_use_id"] for b in blocks if b["type"] == "tool_result"])


def test_foreign_ids_are_sent_in_anthropics_form_and_still_pair() -> None:
    ids = ("functions.write_todos:0", "functions.write_todos:1", "call|fc_9", "")
    uses, results = pairs(body_for(*ids))
    assert all(PATTERN.fullmatch(i) for i in uses), uses
    assert uses == results  # each result still names its call
    assert len(set(uses)) == len(ids)  # two ids never become one
    assert uses == pairs(body_for(*ids))[0]  # the same every time (the cached prefix)


def test_ids_anthropic_takes_are_sent_as_they_are() -> None:
    ids = ("toolu_01KFa9", "call_79382389", "call_00_lCIk-x", "un6k8t18")
    assert pairs(body_for(*ids)) == (list(ids), list(ids))


async def test_the_emulator_refuses_a_foreign_id_and_takes_the_codecs_request() -> None:
    emulator = AnthropicEmulator()
    async with EmulatorServer(emulator) as server, aiohttp.ClientSession() as session:
        url = server.base_url + AnthropicEmulator.API_PREFIX + "/messages"
        headers = {"x-api-key": "test-key", "anthropic-version": "2023-06-01"}
        body = {"model": "claude-sonnet-4-5", "max_tokens": 64, "messages": [
            {"role": "user", "content": [{"type": "text", "text": "plan it"}]},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "functions.x:0",
                                               "name": "write_todos", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "functions.x:0",
                                          "content": "done"}]}]}
        async with session.post(url, json=body, headers=headers) as response:
            assert response.status == 400
            assert (await response.json())["error"]["message"] == BAD_TOOL_ID.format(1, 0)
        adapter = AnthropicAdapter(base_url=server.base_url + AnthropicEmulator.API_PREFIX,
                                   api_key="test-key")
        call = ProviderCall(strategy=Strategy.LOCAL_LOOP, model=SONNET, system_prompt="",
                            tools=(TODOS,), history=turn_with("functions.write_todos:0"),
                            user_text="next")
        request = adapter.build_request(call)
        async with session.post(request.url, data=request.body,
                                headers=dict(request.headers)) as response:
            assert response.status == 200
            await response.read()
