"""The official ``anthropic`` SDK against the Anthropic emulator over loopback."""

from __future__ import annotations

from collections.abc import AsyncIterator

import anthropic
import pytest

from turnstate.emulators import AnthropicEmulator
from turnstate.emulators._base import EmulatorServer


@pytest.fixture
async def client() -> AsyncIterator[tuple[AnthropicEmulator, anthropic.AsyncAnthropic]]:
    emulator = AnthropicEmulator()
    async with EmulatorServer(emulator) as server:
        # The SDK appends /v1/messages to its base URL itself.
        sdk = anthropic.AsyncAnthropic(api_key="test-key", base_url=server.base_url,
                                       max_retries=0)
        yield emulator, sdk
        await sdk.close()


async def test_sdk_streams_a_reply(
    client: tuple[AnthropicEmulator, anthropic.AsyncAnthropic],
) -> None:
    """``messages.stream`` yields the emulator's text deltas and the final message."""
    emulator, sdk = client
    async with sdk.messages.stream(model="claude-sonnet-4-5", max_tokens=256,
                                   messages=[{"role": "user", "content": "hello from the sdk"}]
                                   ) as stream:
        pieces = [text async for text in stream.text_stream]
        final = await stream.get_final_message()
    assert len(pieces) > 1 and "".join(pieces) == "You said: hello from the sdk"
    assert final.stop_reason == "end_turn" and final.id == "msg_000001"
    assert final.usage.input_tokens > 0
    (request,) = emulator.requests
    assert request.path == "/v1/messages" and request.json["stream"] is True
    # SDK 2.16 authenticates with a Bearer header (older ones with x-api-key): redacted both.
    auth = request.headers.get("x-api-key") or request.headers.get("authorization")
    assert auth == "<redacted>" and b"test-key" not in request.body


async def test_sdk_streams_thinking_and_a_tool_call(
    client: tuple[AnthropicEmulator, anthropic.AsyncAnthropic],
) -> None:
    """The SDK assembles the emulator's thinking block (with signature) and tool_use input."""
    emulator, sdk = client
    async with sdk.messages.stream(
        model="claude-sonnet-4-5", max_tokens=4096,
        thinking={"type": "enabled", "budget_tokens": 2048},
        tools=[{"name": "weather", "input_schema": {
            "type": "object", "properties": {"city": {"type": "string"}}}}],
        messages=[{"role": "user", "content": "weather? [[think]] [[call:weather]]"}],
    ) as stream:
        final = await stream.get_final_message()
    thinking, tool_use = final.content
    assert thinking.type == "thinking" and thinking.signature == emulator.sign(thinking.thinking)
    assert tool_use.type == "tool_use" and tool_use.input == {"city": "city-value"}
    assert final.stop_reason == "tool_use"


async def test_sdk_raises_the_emulator_errors(
    client: tuple[AnthropicEmulator, anthropic.AsyncAnthropic],
) -> None:
    """A rule the emulator enforces reaches the SDK as its BadRequestError."""
    _, sdk = client
    with pytest.raises(anthropic.BadRequestError, match="unexpected `tool_use_id`"):
        await sdk.messages.create(model="claude-sonnet-4-5", max_tokens=10, messages=[
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "T1", "content": "x"}]}])
