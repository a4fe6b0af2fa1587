"""The Anthropic emulator over loopback: streams, tool pairing, thinking signatures, faults."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import aiohttp
import attrs
import pytest

from turnstate.core._conversation import (
    Message,
    MessageStatus,
    ReasoningPart,
    Role,
    TextPart,
    ToolResultPart,
    ToolSpec,
)
from turnstate.core._decisions import Strategy
from turnstate.core._errors import (
    FatalProviderError,
    ProviderError,
    ProviderProtocolError,
    TransientProviderError,
)
from turnstate.core._json import JsonObject
from turnstate.core._registry import DEFAULT_REGISTRY
from turnstate.emulators import AnthropicEmulator
from turnstate.emulators._base import EmulatorServer, Fault, Item, items_from_messages
from turnstate.providers._protocol import ProviderCall, ProviderResponse, TextDelta
from turnstate.providers._sse import SseDecoder
from turnstate.providers.anthropic import AnthropicAdapter, parse_response_body

SONNET = DEFAULT_REGISTRY.model("anthropic", "claude-sonnet-4-5")
WEATHER = ToolSpec(name="weather", parameters={
    "type": "object", "properties": {"city": {"type": "string"}}})


@pytest.fixture
async def rig() -> AsyncIterator[tuple[AnthropicEmulator, str, aiohttp.ClientSession]]:
    emulator = AnthropicEmulator()
    async with EmulatorServer(emulator) as server, aiohttp.ClientSession() as session:
        yield emulator, server.base_url + AnthropicEmulator.API_PREFIX, session


Rig = tuple[AnthropicEmulator, str, aiohttp.ClientSession]


@attrs.define
class Result:
    status: int
    response: ProviderResponse | None = None
    error: ProviderError | None = None
    body: Any = None
    names: list[str] = attrs.field(factory=list)
    deltas: list[Any] = attrs.field(factory=list)


async def run(rig: Rig, call: ProviderCall, adapter: AnthropicAdapter | None = None) -> Result:
    """Send the call's request; parse the stream or classify the error."""
    _, base, session = rig
    adapter = adapter or AnthropicAdapter(base_url=base, api_key="test-key",
                                          thinking_budget_tokens=2048)
    request = adapter.build_request(call)
    raw = b""
    async with session.post(request.url, data=request.body,
                            headers=dict(request.headers)) as response:
        try:
            async for data in response.content.iter_any():
                raw += data
        except aiohttp.ClientPayloadError:
            pass  # a cut connection: the parser decides whether the stream completed
    if response.status != 200:
        return Result(status=response.status, body=json.loads(raw),
                      error=adapter.classify_error(response.status, response.headers, raw))
    parser = adapter.stream_parser()
    result = Result(status=200)
    for event in SseDecoder().feed(raw):
        result.names.append(event.event)
        result.deltas.extend(parser.feed(event))
    result.response = parser.finish()
    return result


def make_call(text: str, **changes: Any) -> ProviderCall:
    return ProviderCall(strategy=Strategy.LOCAL_LOOP, model=SONNET, system_prompt="sys",
                        tools=(WEATHER,), user_text=text, **changes)


async def tool_round(rig: Rig, text: str) -> tuple[ProviderCall, ProviderResponse,
                                                   tuple[JsonObject, ...]]:
    """The first call of a tool turn and the loop its results make."""
    call = make_call(text)
    first = await run(rig, call)
    assert first.response is not None and first.response.tool_calls
    results = [ToolResultPart(call_id=c.call_id, name=c.name, output="sunny")
               for c in first.response.tool_calls]
    loop = AnthropicAdapter().extend_loop(call, first.response, results)
    return call, first.response, loop


def error_message(result: Result) -> str:
    assert result.body["type"] == "error"
    assert result.body["error"]["type"] == "invalid_request_error"
    assert result.body["request_id"].startswith("req_")
    return str(result.body["error"]["message"])


async def test_text_stream_in_the_real_event_order(rig: Rig) -> None:
    """A text reply streams message_start, a ping, block events, message_delta, message_stop."""
    result = await run(rig, make_call("hello there"))
    assert result.names == ["message_start", "content_block_start", "ping",
                            "content_block_delta", "content_block_delta", "content_block_delta",
                            "content_block_delta", "content_block_stop", "message_delta",
                            "message_stop"]
    assert result.response is not None
    assert result.response.parts == (TextPart(text="You said: hello there"),)
    assert len(result.deltas) == 4 and all(isinstance(d, TextDelta) for d in result.deltas)
    assert result.response.response_id == "msg_000001"
    assert result.response.usage.input_tokens > 0 and result.response.finish_reason == "stop"


async def test_thinking_tool_loop_passes_the_signature_check(rig: Rig) -> None:
    """A signed thinking block sent back unchanged in the loop is accepted."""
    emulator = rig[0]
    call, first, loop = await tool_round(rig, "weather? [[think]] [[call:weather*2]]")
    block = first.parts[0]
    assert isinstance(block, ReasoningPart) and block.kind == "thinking"
    assert block.signature == emulator.sign(block.text)
    second = await run(rig, attrs.evolve(call, loop_messages=loop, iteration=1))
    assert second.response is not None and second.response.finish_reason == "stop"
    sent = emulator.requests[-1].json["messages"]
    assert sent[1]["content"][0] == {"type": "thinking", "thinking": block.text,
                                     "signature": block.signature}
    assert emulator.requests[-1].json["thinking"] == {"type": "enabled", "budget_tokens": 2048}


async def test_altered_thinking_is_rejected(rig: Rig, caplog: pytest.LogCaptureFixture) -> None:
    """Editing the thinking text (or forging a signature) is 'Invalid `signature`'."""
    call, _, loop = await tool_round(rig, "w [[think]] [[call:weather]]")
    assistant = dict(loop[0])
    assistant["content"] = [dict(loop[0]["content"][0], thinking="edited"),
                            *loop[0]["content"][1:]]
    with caplog.at_level(logging.ERROR, logger="turnstate"):
        result = await run(rig, attrs.evolve(call, loop_messages=(assistant, loop[1])))
    assert result.status == 400
    assert error_message(result) == "messages.1.content.0: Invalid `signature` in `thinking` block."
    assert type(result.error) is FatalProviderError
    assert any("[provider][bug]" in r.getMessage() for r in caplog.records)
    foreign = AnthropicEmulator(secret=b"another server")
    forged = dict(loop[0], content=[dict(loop[0]["content"][0],
                                         signature=foreign.sign("Thinking about 'w' (round 0)."))])
    forged["content"] += loop[0]["content"][1:]
    result = await run(rig, attrs.evolve(call, loop_messages=(forged, loop[1])))
    assert result.status == 400 and "Invalid `signature`" in error_message(result)
    odd = dict(loop[0], content=[dict(loop[0]["content"][0], signature="sïgnature"),
                                 *loop[0]["content"][1:]])
    result = await run(rig, attrs.evolve(call, loop_messages=(odd, loop[1])))
    assert result.status == 400 and "Invalid `signature`" in error_message(result)


async def test_dropped_thinking_is_rejected(rig: Rig) -> None:
    """With thinking enabled, a loop assistant message without its thinking block fails."""
    call, _, loop = await tool_round(rig, "w [[think]] [[call:weather]]")
    dropped = dict(loop[0], content=loop[0]["content"][1:])
    result = await run(rig, attrs.evolve(call, loop_messages=(dropped, loop[1])))
    assert result.status == 400
    assert error_message(result).startswith(
        "messages.1.content.0.type: Expected `thinking` or `redacted_thinking`, but found "
        "`tool_use`. When `thinking` is enabled, a final `assistant` message must start with "
        "a thinking block")
    assert type(result.error) is FatalProviderError


async def test_calls_issued_without_thinking_need_none_back(rig: Rig) -> None:
    """Without ``[[think]]`` no thinking is issued, and the loop passes without one."""
    call, first, loop = await tool_round(rig, "w [[call:weather]]")
    assert not any(isinstance(p, ReasoningPart) for p in first.parts)
    second = await run(rig, attrs.evolve(call, loop_messages=loop, iteration=1))
    assert second.status == 200


async def test_redacted_thinking_round_trip(rig: Rig) -> None:
    """Redacted thinking is issued whole, kept verbatim, and verified when it comes back."""
    emulator = rig[0]
    emulator.redact_thinking = True
    call, first, loop = await tool_round(rig, "w [[think]] [[call:weather]]")
    redacted = first.parts[0]
    assert isinstance(redacted, ReasoningPart) and redacted.kind == "redacted_thinking"
    assert loop[0]["content"][0] == {"type": "redacted_thinking", "data": redacted.data}
    assert (await run(rig, attrs.evolve(call, loop_messages=loop))).status == 200
    tampered = dict(loop[0], content=[{"type": "redacted_thinking", "data": "AAAA.bad"},
                                      *loop[0]["content"][1:]])
    result = await run(rig, attrs.evolve(call, loop_messages=(tampered, loop[1])))
    assert result.status == 400 and "Invalid `signature`" in error_message(result)


async def test_tool_use_without_result_is_rejected(rig: Rig) -> None:
    """A tool_use not answered in the next message is the real pairing 400."""
    call, first, loop = await tool_round(rig, "w [[call:weather]]")
    result = await run(rig, attrs.evolve(call, loop_messages=(loop[0],)))
    assert result.status == 400
    call_id = first.tool_calls[0].call_id
    assert error_message(result) == (
        f"messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: "
        f"{call_id}. Each `tool_use` block must have a corresponding `tool_result` block in the "
        f"next message.")


async def test_unexpected_tool_use_id_is_rejected(rig: Rig) -> None:
    """A tool_result for an unknown tool_use is the real 400."""
    orphan = ({"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "T1", "content": "x"}]},)
    result = await run(rig, make_call("q", loop_messages=orphan))
    assert result.status == 400
    assert error_message(result) == (
        "messages.0.content.1: unexpected `tool_use_id` found in `tool_result` blocks: T1. "
        "Each `tool_result` block must have a corresponding `tool_use` block in the previous "
        "message.")


@pytest.mark.parametrize("missing", ["model", "max_tokens", "messages"])
async def test_required_fields(rig: Rig, missing: str) -> None:
    """model, max_tokens and messages are required ("<field>: Field required")."""
    _, base, session = rig
    body = {"model": "claude-sonnet-4-5", "max_tokens": 10,
            "messages": [{"role": "user", "content": "x"}]}
    del body[missing]
    async with session.post(base + "/messages", json=body) as response:
        assert response.status == 400
        data = await response.json()
    assert data["error"] == {"type": "invalid_request_error",
                             "message": f"{missing}: Field required"}


async def test_faults_overloaded_and_cut(rig: Rig) -> None:
    """A 529 fault is transient; a cut stream cannot finish; the log has both requests."""
    emulator = rig[0]
    emulator.faults.push(Fault(status=529, body={"type": "error", "error": {
        "type": "overloaded_error", "message": "Overloaded"}}), Fault(cut_after=4))
    result = await run(rig, make_call("a"))
    assert result.status == 529 and type(result.error) is TransientProviderError
    with pytest.raises(ProviderProtocolError, match="message_stop"):
        await run(rig, make_call("one two three four"))
    assert len(emulator.requests) == 2
    assert emulator.requests[0].headers["x-api-key"] == "<redacted>"
    assert emulator.requests[0].headers["anthropic-version"] == "2023-06-01"


async def test_non_streaming_request_gets_a_message_body(rig: Rig) -> None:
    """Without ``stream`` the reply is a Message body the codec can read."""
    _, base, session = rig
    body = {"model": "claude-sonnet-4-5", "max_tokens": 100,
            "messages": [{"role": "user", "content": "plain [[call:weather]]"}],
            "tools": [{"name": "weather", "input_schema": {"type": "object", "properties": {}}}]}
    async with session.post(base + "/messages", json=body) as response:
        data = await response.json()
    parsed = parse_response_body(data)
    assert data["stop_reason"] == "tool_use"
    assert parsed.tool_calls[0].name == "weather" and parsed.tool_calls[0].arguments == "{}"


async def test_conversation_shows_a_replay_from_zero(rig: Rig) -> None:
    """What a request replays equals the committed history in neutral form, plus the turn."""
    emulator = rig[0]
    call, first, loop = await tool_round(rig, "weather? [[think]] [[call:weather]]")
    final = await run(rig, attrs.evolve(call, loop_messages=loop, iteration=1))
    assert final.response is not None
    results = [ToolResultPart(call_id=c.call_id, name=c.name, output="sunny")
               for c in first.tool_calls]
    now = datetime(2026, 1, 1, tzinfo=UTC)
    history = tuple(Message(id=f"m{i}", chat_id="c", seq=i, role=role,
                            status=MessageStatus.COMPLETED, parts=parts, created_at=now,
                            updated_at=now)
                    for i, (role, parts) in enumerate(
                        [(Role.USER, (TextPart(text=call.user_text),)),
                         (Role.ASSISTANT, (*first.parts, *results, *final.response.parts))], 1))
    await run(rig, make_call("thanks", history=history))
    assert emulator.conversation() == [*items_from_messages(history),
                                       Item(kind="user", text="thanks")]
