"""Anthropic: a text block of whitespace only is never sent back.

The Messages API refuses a message whose text blocks hold only whitespace: "messages:
text content blocks must contain non-whitespace text" (400 ``invalid_request_error``;
LibreChat-AI/agents#124 checked it against ``messages.create``: ``[text:'\\n']`` and
``[text:' ']`` are refused, ``[text:' ', text:'real']`` taken; anthropics/claude-code
#23440). Claude itself answers so: a text block of ``"\\n\\n"`` before a tool call or as
a whole answer (nick1udwig/kibitz#78). The codec wrote such text back as it was, so the
next request of the tool loop failed, and, stored in the history, every later request
of the chat failed the same way: a chat that could not go on.
"""

from __future__ import annotations

import itertools
import json
from datetime import UTC, datetime
from typing import Any

import aiohttp

from tests.providers.support import message as msg
from tests.providers.support import request_json
from turnstate.core._conversation import (
    Message,
    Role,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    ToolSpec,
    Usage,
)
from turnstate.core._decisions import Strategy
from turnstate.core._registry import DEFAULT_REGISTRY
from turnstate.emulators import AnthropicEmulator, EmulatorServer
from turnstate.emulators._anthropic_checks import BLANK_TEXT, EMPTY_TEXT
from turnstate.providers._protocol import ProviderCall, ProviderResponse
from turnstate.providers.anthropic import AnthropicAdapter

NOW = datetime(2026, 12, 4, tzinfo=UTC)
SONNET = DEFAULT_REGISTRY.model("anthropic", "claude-sonnet-4-5")
WEATHER = ToolSpec(name="weather", description="Weather.", parameters={
    "type": "object", "properties": {"city": {"type": "string"}}})
CALL = ToolCallPart(call_id="toolu_01", name="weather", arguments='{"city":"Paris"}',
                    provider="anthropic", model="claude-sonnet-4-5-20250929")
RESULT = ToolResultPart(call_id="toolu_01", name="weather", output="22C")


def call_with(*history: Message, **changes: Any) -> ProviderCall:
    fields: dict[str, Any] = {"strategy": Strategy.LOCAL_LOOP, "model": SONNET,
                              "system_prompt": "Be kind.", "tools": (WEATHER,),
                              "history": history, "user_text": "next"}
    return ProviderCall(**{**fields, **changes})


def text_blocks(body: dict[str, Any]) -> list[str]:
    return [block["text"] for message in body["messages"] for block in message["content"]
            if block["type"] == "text"]


def assert_no_blank_text(body: dict[str, Any]) -> None:
    assert all(text.strip() for text in text_blocks(body)), text_blocks(body)
    roles = [message["role"] for message in body["messages"]]
    assert all(a != b for a, b in itertools.pairwise(roles)), roles


def test_a_blank_answer_in_the_history_is_not_sent_back() -> None:
    history = (msg(1, Role.USER, TextPart(text="hi")),
               msg(2, Role.ASSISTANT, TextPart(text="\n\n")),
               msg(3, Role.USER, TextPart(text="again")),
               msg(4, Role.ASSISTANT, TextPart(text="Hello.")))
    body = request_json(AnthropicAdapter(), call_with(*history))
    assert_no_blank_text(body)
    assert text_blocks(body) == ["hi", "again", "Hello.", "next"]


def test_blank_text_before_a_call_is_not_sent_back() -> None:
    history = (msg(1, Role.USER, TextPart(text="weather?")),
               msg(2, Role.ASSISTANT, TextPart(text="\n\n"), CALL, RESULT,
                   TextPart(text=" "), TextPart(text="\n"), TextPart(text="It is 22C.")))
    body = request_json(AnthropicAdapter(), call_with(*history))
    assert_no_blank_text(body)
    assistant = body["messages"][1]["content"]
    assert [block["type"] for block in assistant] == ["tool_use"]
    assert text_blocks(body)[-2] == " \nIt is 22C."  # joined with the text after it


def test_blank_text_in_the_tool_loop_is_not_sent_back() -> None:
    adapter = AnthropicAdapter()
    first = call_with(msg(1, Role.USER, TextPart(text="hello")))
    response = ProviderResponse(response_id="msg_1", parts=(TextPart(text="\n\n"), CALL),
                                usage=Usage(), finish_reason="tool_calls")
    loop = adapter.extend_loop(first, response, (RESULT,))
    body = json.loads(adapter.build_request(
        call_with(msg(1, Role.USER, TextPart(text="hello")), loop_messages=loop)).body)
    assert_no_blank_text(body)
    assert [block["type"] for block in body["messages"][-2]["content"]] == ["tool_use"]


async def test_the_emulator_refuses_blank_text_and_takes_what_the_codec_sends() -> None:
    """The emulator holds the API's rule, and a chat whose answer was ``"\\n\\n"`` goes on."""
    emulator = AnthropicEmulator()
    async with EmulatorServer(emulator) as server, aiohttp.ClientSession() as session:
        url = server.base_url + AnthropicEmulator.API_PREFIX + "/messages"
        headers = {"x-api-key": "test-key", "anthropic-version": "2023-06-01"}
        for content, error in (([{"type": "text", "text": "\n\n"}], BLANK_TEXT),
                               ([{"type": "text", "text": ""}], EMPTY_TEXT)):
            body = {"model": "claude-sonnet-4-5", "max_tokens": 64, "messages": [
                {"role": "user", "content": [{"type": "text", "text": "hi"}]},
                {"role": "assistant", "content": content},
                {"role": "user", "content": [{"type": "text", "text": "again"}]}]}
            async with session.post(url, json=body, headers=headers) as response:
                assert response.status == 400
                assert (await response.json())["error"]["message"] == error
        adapter = AnthropicAdapter(base_url=server.base_url + AnthropicEmulator.API_PREFIX,
                                   api_key="test-key")
        history = (msg(1, Role.USER, TextPart(text="hi")),
                   msg(2, Role.ASSISTANT, TextPart(text="\n\n"), CALL, RESULT,
                       TextPart(text=" ")))
        request = adapter.build_request(call_with(*history))
        async with session.post(request.url, data=request.body,
                                headers=dict(request.headers)) as response:
            assert response.status == 200
            await response.read()
