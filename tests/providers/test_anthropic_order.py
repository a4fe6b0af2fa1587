"""Anthropic replay keeps a segment's blocks in the order the model made them: text after
a call stays after it (thinking still leads), in the loop and in the history, and the
emulator (pairing and thinking rules) accepts the result over loopback."""

from __future__ import annotations

from typing import Any

from tests.providers.test_anthropic_codec import SONNET, make_call, msg, payload, result
from turnstate.core._conversation import (
    OpaquePart,
    ReasoningPart,
    Role,
    TextPart,
    ToolCallPart,
)
from turnstate.emulators import AnthropicEmulator, EmulatorServer
from turnstate.providers import ProviderResponse
from turnstate.providers._transport import AiohttpTransport
from turnstate.providers.anthropic import AnthropicAdapter

MODEL = "claude-sonnet-4-5"


def call(call_id: str, city: str) -> ToolCallPart:
    return ToolCallPart(call_id=call_id, name="weather", arguments=f'{{"city":"{city}"}}',
                        provider="anthropic", model=MODEL)


def interleaved(signature: str) -> tuple[Any, ...]:
    search = OpaquePart(provider="anthropic", model=MODEL, kind="server_tool_use",
                        raw='{"type":"server_tool_use","id":"srv1","name":"web_search",'
                            '"input":{"query":"q"}}')
    return (ReasoningPart(provider="anthropic", model=MODEL, kind="thinking", text="plan",
                          signature=signature),
            TextPart(text="First "), TextPart(text="Paris."), call("A", "Paris"),
            TextPart(text="Then Oslo."), search, call("B", "Oslo"), TextPart(text="Wait."))


def kinds(blocks: list[dict[str, Any]]) -> list[str]:
    return [b.get("text") or b.get("id") or b["type"] for b in blocks]


def test_loop_keeps_the_order_with_thinking_first() -> None:
    response = ProviderResponse(response_id="msg_1", parts=interleaved("sig"))
    loop = AnthropicAdapter().extend_loop(make_call(), response, [result("A"), result("B")])
    assert kinds(loop[0]["content"]) == ["thinking", "First Paris.", "A", "Then Oslo.",
                                         "srv1", "B", "Wait."]
    assert [b["tool_use_id"] for b in loop[1]["content"]] == ["A", "B"]


def test_history_keeps_the_order_of_each_segment() -> None:
    """A completed turn (thinking left out) with a second segment after the results."""
    parts = (*interleaved("sig"), result("A"), result("B"), TextPart(text="Done."))
    history = (msg(1, Role.USER, TextPart(text="q")), msg(2, Role.ASSISTANT, *parts))
    messages = payload(make_call(*history))["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant", "user"]
    assert kinds(messages[1]["content"]) == ["First Paris.", "A", "Then Oslo.", "B", "Wait."]
    assert kinds(messages[2]["content"]) == ["tool_result", "tool_result"]
    assert kinds(messages[3]["content"]) == ["Done."]


async def test_the_emulator_accepts_the_interleaved_loop() -> None:
    """With thinking enabled, the loop request (signed thinking first, text after the
    calls) passes the emulator's signature, thinking-first and pairing rules."""
    emulator = AnthropicEmulator()
    async with EmulatorServer(emulator) as server, AiohttpTransport() as transport:
        adapter = AnthropicAdapter(base_url=server.base_url + "/v1", api_key="k",
                                   thinking_budget_tokens=1024)
        parts = tuple(p for p in interleaved(emulator.sign("plan"))
                      if not isinstance(p, OpaquePart))  # the emulator made no search
        first = make_call(model=SONNET, user_text="weather [[call:weather]]")
        loop = adapter.extend_loop(first, ProviderResponse(response_id="m", parts=parts),
                                   [result("A"), result("B")])
        second = make_call(model=SONNET, user_text="weather [[call:weather]]",
                           loop_messages=loop, iteration=1)
        parser = adapter.stream_parser()
        async for event in transport.stream(adapter.build_request(second),
                                            adapter.classify_error):
            parser.feed(event)
        response = parser.finish()
    (answer,) = [p.text for p in response.parts if isinstance(p, TextPart)]
    assert response.finish_reason == "stop" and answer.startswith("Tool results:")
    sent = emulator.requests[-1].json["messages"][-2]["content"]
    assert kinds(sent) == ["thinking", "First Paris.", "A", "Then Oslo.", "B", "Wait."]
