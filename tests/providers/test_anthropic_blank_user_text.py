"""Anthropic: a stored user message of whitespace only is replayed as a valid message.

The engine now refuses a blank question, but a chat may hold one from before, committed
on a provider that takes it (OpenAI, Gemini, DeepSeek). The codec sent it back as it
was, and the Messages API refuses it ("messages: text content blocks must contain
non-whitespace text", "... must be non-empty"), so every later Anthropic turn of the
chat failed. Such a message is now sent as ``BLANK_USER_TEXT`` (left out, it would leave
the answer after it without its question); whitespace text beside an image is left out.
"""

from __future__ import annotations

from typing import Any

import aiohttp
import pytest

from tests.providers.support import message as msg
from tests.providers.support import request_json
from turnstate.core._conversation import Message, Role, TextPart
from turnstate.core._decisions import Strategy
from turnstate.core._media import ImagePart
from turnstate.core._registry import DEFAULT_REGISTRY
from turnstate.emulators import AnthropicEmulator, EmulatorServer
from turnstate.providers._protocol import ProviderCall
from turnstate.providers.anthropic import AnthropicAdapter
from turnstate.providers.anthropic._user_blocks import BLANK_USER_TEXT

SONNET = DEFAULT_REGISTRY.model("anthropic", "claude-sonnet-4-5")
IMAGE = ImagePart(url="https://example.com/a.png")
BLANK_MESSAGES = [(TextPart(text=""),), (TextPart(text="  "),),
                  (TextPart(text=" "), TextPart(text="\n"))]


def call_with(*history: Message, **changes: Any) -> ProviderCall:
    fields: dict[str, Any] = {"strategy": Strategy.REPLAY, "model": SONNET,
                              "system_prompt": "Be kind.", "tools": (),
                              "history": history, "user_text": "next"}
    return ProviderCall(**{**fields, **changes})


def with_blank(*parts: TextPart) -> tuple[Message, ...]:
    return (msg(1, Role.USER, *parts), msg(2, Role.ASSISTANT, TextPart(text="Yes?")),
            msg(3, Role.USER, TextPart(text="hi")), msg(4, Role.ASSISTANT, TextPart(text="Hi.")))


@pytest.mark.parametrize("parts", BLANK_MESSAGES)
def test_a_blank_user_message_is_sent_as_the_stand_in(parts: tuple[TextPart, ...]) -> None:
    body = request_json(AnthropicAdapter(), call_with(*with_blank(*parts)))
    assert [(m["role"], [b["text"] for b in m["content"]]) for m in body["messages"]] == [
        ("user", [BLANK_USER_TEXT]), ("assistant", ["Yes?"]), ("user", ["hi"]),
        ("assistant", ["Hi."]), ("user", ["next"])]


def test_whitespace_beside_an_image_is_left_out_and_other_text_kept() -> None:
    body = request_json(AnthropicAdapter(), call_with(
        msg(1, Role.USER, TextPart(text=" "), IMAGE),
        msg(2, Role.ASSISTANT, TextPart(text="A cat.")),
        user_parts=(TextPart(text="\n"), IMAGE, TextPart(text=" and?"))))
    assert [[b["type"] for b in m["content"]] for m in body["messages"]] == [
        ["image"], ["text"], ["text", "image", "text"]]


async def test_the_emulator_takes_what_the_codec_sends_for_blank_user_text() -> None:
    async with EmulatorServer(emulator := AnthropicEmulator()) as server, \
            aiohttp.ClientSession() as session:
        adapter = AnthropicAdapter(base_url=server.base_url + AnthropicEmulator.API_PREFIX,
                                   api_key="test-key")
        calls = [call_with(*with_blank(*parts)) for parts in BLANK_MESSAGES]
        calls.append(call_with(msg(1, Role.USER, TextPart(text="\n"), IMAGE),
                               msg(2, Role.ASSISTANT, TextPart(text="A cat.")),
                               user_parts=(TextPart(text=" "), IMAGE)))
        for call in calls:
            request = adapter.build_request(call)
            async with session.post(request.url, data=request.body,
                                    headers=dict(request.headers)) as response:
                assert response.status == 200, await response.text()
                await response.read()
        assert len(emulator.requests) == len(calls)
