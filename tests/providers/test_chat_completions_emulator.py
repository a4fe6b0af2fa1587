"""The Chat Completions emulator over loopback: replies, tool loops, rules, faults, the log."""

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
    RateLimited,
    TransientProviderError,
)
from turnstate.core._registry import DEFAULT_REGISTRY
from turnstate.emulators import ChatCompletionsEmulator
from turnstate.emulators._base import (
    EmulatorServer,
    Fault,
    Item,
    Reply,
    ScriptedCall,
    items_from_messages,
)
from turnstate.providers._protocol import (
    HttpRequest,
    ProviderCall,
    ProviderResponse,
    StreamParser,
    TextDelta,
)
from turnstate.providers._sse import SseDecoder
from turnstate.providers.chat_completions import ChatCompletionsAdapter, parse_response_body

WEATHER = ToolSpec(name="weather", parameters={
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]})


@attrs.define
class Outcome:
    status: int
    body: bytes = b""
    deltas: list[Any] = attrs.field(factory=list)
    events: int = 0


async def exchange(
    session: aiohttp.ClientSession, request: HttpRequest, parser: StreamParser
) -> Outcome:
    """Send a request over loopback and feed its SSE events to ``parser``."""
    async with session.post(request.url, data=request.body,
                            headers=dict(request.headers)) as response:
        outcome = Outcome(status=response.status)
        if response.status != 200:
            outcome.body = await response.read()
            return outcome
        decoder = SseDecoder()
        try:
            async for data in response.content.iter_any():
                for event in decoder.feed(data):
                    outcome.events += 1
                    outcome.deltas.extend(parser.feed(event))
        except aiohttp.ClientPayloadError:
            pass  # a cut connection: the parser decides whether the stream completed
        return outcome


@pytest.fixture
async def rig() -> AsyncIterator[tuple[ChatCompletionsEmulator, ChatCompletionsAdapter,
                                       aiohttp.ClientSession]]:
    emulator = ChatCompletionsEmulator()
    async with EmulatorServer(emulator) as server, aiohttp.ClientSession() as session:
        adapter = ChatCompletionsAdapter(
            base_url=server.base_url + ChatCompletionsEmulator.API_PREFIX, api_key="test-key")
        yield emulator, adapter, session


Rig = tuple[ChatCompletionsEmulator, ChatCompletionsAdapter, aiohttp.ClientSession]


def make_call(text: str, **changes: Any) -> ProviderCall:
    model = DEFAULT_REGISTRY.model("openai-compatible", "gpt-4o-mini")
    return ProviderCall(strategy=Strategy.LOCAL_LOOP, model=model, system_prompt="sys",
                        tools=(WEATHER,), user_text=text, **changes)


async def run(rig: Rig, call: ProviderCall) -> tuple[Outcome, ProviderResponse | ProviderError]:
    _, adapter, session = rig
    parser = adapter.stream_parser()
    outcome = await exchange(session, adapter.build_request(call), parser)
    if outcome.status != 200:
        return outcome, adapter.classify_error(outcome.status, {}, outcome.body)
    return outcome, parser.finish()


async def test_text_reply_streams_in_deltas_with_usage(rig: Rig) -> None:
    """A plain message streams its reply in several deltas, then usage and [DONE]."""
    emulator = rig[0]
    outcome, response = await run(rig, make_call("hello there friend"))
    assert isinstance(response, ProviderResponse)
    assert response.parts[0].text == "You said: hello there friend"  # type: ignore[union-attr]
    assert len(outcome.deltas) == 5 and all(isinstance(d, TextDelta) for d in outcome.deltas)
    assert response.response_id == "chatcmpl-000001"
    assert response.finish_reason == "stop"
    assert response.usage.input_tokens > 0 and response.usage.output_tokens > 0
    assert response.usage.input_tokens == emulator.usages[0]["prompt_tokens"]
    assert outcome.events == 5 + 4  # role chunk, 5 deltas, finish, usage, [DONE]


async def test_request_log_records_body_and_redacts_the_key(rig: Rig) -> None:
    """Every request is logged with its JSON body; the auth header is redacted."""
    emulator = rig[0]
    await run(rig, make_call("hi"))
    (logged,) = emulator.requests
    assert logged.path == "/v1/chat/completions" and logged.method == "POST"
    assert logged.json["messages"][-1] == {"role": "user", "content": "hi"}
    assert logged.headers["authorization"] == "<redacted>"
    assert b"test-key" not in logged.body


async def test_parallel_tool_calls_then_results_then_answer(rig: Rig) -> None:
    """``[[call:weather*2]]`` gives two calls; their results in the loop give the answer."""
    _, adapter, _ = rig
    call = make_call("weather? [[call:weather*2]]")
    _, first = await run(rig, call)
    assert isinstance(first, ProviderResponse) and first.finish_reason == "tool_calls"
    assert [(c.call_id, c.name, c.arguments) for c in first.tool_calls] == [
        ("call_000001", "weather", '{"city":"city-value"}'),
        ("call_000002", "weather", '{"city":"city-value"}')]
    results = [ToolResultPart(call_id=c.call_id, name=c.name, output=f"sunny {i}")
               for i, c in enumerate(first.tool_calls)]
    loop = adapter.extend_loop(call, first, results)
    _, second = await run(rig, attrs.evolve(call, loop_messages=loop, iteration=1))
    assert isinstance(second, ProviderResponse) and second.finish_reason == "stop"
    assert second.parts[0].text == "Tool results: weather=sunny 0; weather=sunny 1."  # type: ignore[union-attr]


async def test_unanswered_tool_call_is_rejected_with_the_real_message(
    rig: Rig, caplog: pytest.LogCaptureFixture
) -> None:
    """A call with no tool message is a 400 that the codec classifies as a logged bug."""
    _, adapter, _ = rig
    call = make_call("go [[call:weather]]")
    _, first = await run(rig, call)
    assert isinstance(first, ProviderResponse)
    loop = adapter.extend_loop(call, first, [])
    with caplog.at_level(logging.ERROR, logger="turnstate"):
        outcome, error = await run(rig, attrs.evolve(call, loop_messages=loop))
    assert outcome.status == 400
    assert json.loads(outcome.body) == {"error": {
        "message": "An assistant message with 'tool_calls' must be followed by tool messages "
                   "responding to each 'tool_call_id'. The following tool_call_ids did not "
                   "have response messages: call_000001",
        "type": "invalid_request_error", "param": "messages.[2].role", "code": None}}
    assert type(error) is FatalProviderError
    assert any("[provider][bug]" in r.getMessage() for r in caplog.records)


async def test_orphan_tool_message_is_rejected(rig: Rig) -> None:
    """A tool message that answers no preceding call is a 400 with the real message."""
    orphan = ({"role": "tool", "tool_call_id": "call_nope", "content": "x"},)
    outcome, error = await run(rig, make_call("hi", loop_messages=orphan))
    assert outcome.status == 400
    assert json.loads(outcome.body)["error"]["message"] == (
        "Messages with role 'tool' must be a response to a preceeding message with 'tool_calls'")
    assert type(error) is FatalProviderError


@pytest.mark.parametrize(("payload", "message"), [
    ({"messages": [{"role": "user", "content": "x"}]}, "you must provide a model parameter"),
    ({"model": "m"}, "Missing required parameter: 'messages'."),
    ({"model": "m", "messages": []}, "Invalid 'messages': empty array."),
])
async def test_shape_errors(rig: Rig, payload: dict[str, Any], message: str) -> None:
    """Missing model or messages are 400 ``invalid_request_error``."""
    _, adapter, session = rig
    async with session.post(adapter.url, json=payload) as response:
        assert response.status == 400
        error = (await response.json())["error"]
    assert error["message"].startswith(message)
    assert error["type"] == "invalid_request_error"


async def test_status_fault_is_classified(rig: Rig) -> None:
    """A pushed 503 fault fails the next request only, as a transient error."""
    emulator = rig[0]
    emulator.faults.push(Fault(status=503, body={"error": {
        "message": "The engine is currently overloaded", "type": "server_error"}}))
    outcome, error = await run(rig, make_call("a"))
    assert outcome.status == 503 and type(error) is TransientProviderError
    _, ok = await run(rig, make_call("b"))
    assert isinstance(ok, ProviderResponse)
    assert len(emulator.requests) == 2


async def test_rate_limit_fault_carries_retry_after(rig: Rig) -> None:
    """A 429 fault's Retry-After reaches RateLimited.retry_after."""
    _, adapter, session = rig
    rig[0].faults.push(Fault.rate_limited(retry_after=2))
    request = adapter.build_request(make_call("a"))
    async with session.post(request.url, data=request.body,
                            headers=dict(request.headers)) as response:
        error = adapter.classify_error(response.status, response.headers, await response.read())
    assert isinstance(error, RateLimited) and error.retry_after == 2.0


async def test_cut_stream_cannot_finish(rig: Rig) -> None:
    """A stream cut after three events leaves the parser incomplete."""
    emulator, adapter, session = rig
    emulator.faults.push(Fault(cut_after=3))
    parser = adapter.stream_parser()
    outcome = await exchange(session, adapter.build_request(make_call("one two three four")),
                             parser)
    assert outcome.events == 3 and not parser.done
    with pytest.raises(ProviderProtocolError, match="ended before it completed"):
        parser.finish()


async def test_malformed_frame_is_a_protocol_error(rig: Rig) -> None:
    """A frame that is not JSON raises ProviderProtocolError from the parser."""
    rig[0].faults.push(Fault(malformed_after=2))
    with pytest.raises(ProviderProtocolError):
        await run(rig, make_call("hello"))


async def test_scripted_reply_wins(rig: Rig) -> None:
    """An explicit Reply pushed by a test is what the model says."""
    rig[0].model.push(Reply(text="scripted answer", calls=(
        ScriptedCall(name="weather", arguments='{"city":"Oslo"}'),)))
    _, response = await run(rig, make_call("anything"))
    assert isinstance(response, ProviderResponse)
    assert response.parts[0].text == "scripted answer"  # type: ignore[union-attr]
    assert response.tool_calls[0].arguments == '{"city":"Oslo"}'


async def test_non_streaming_request_gets_a_completion_body(rig: Rig) -> None:
    """Without ``stream: true`` the reply is a chat.completion body the codec can read."""
    _, adapter, session = rig
    payload = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hey"}]}
    async with session.post(adapter.url, json=payload) as response:
        data = await response.json()
    assert data["object"] == "chat.completion"
    parsed = parse_response_body(data)
    assert parsed.parts[0].text == "You said: hey"  # type: ignore[union-attr]
    assert parsed.usage.input_tokens == data["usage"]["prompt_tokens"]


async def test_without_include_usage_the_stream_ends_with_done(rig: Rig) -> None:
    """No usage chunk is sent unless asked for; ``[DONE]`` completes the stream."""
    _, adapter, session = rig
    payload = {"model": "gpt-4o-mini", "stream": True,
               "messages": [{"role": "user", "content": "hey"}]}
    async with session.post(adapter.url, json=payload) as response:
        text = await response.text()
    frames = [line[6:] for line in text.splitlines() if line.startswith("data: ")]
    assert frames[-1] == "[DONE]"
    assert all(json.loads(f)["usage"] is None for f in frames[:-1])


async def test_openai_sdk_streams_from_the_emulator(rig: Rig) -> None:
    """The official openai SDK streams a reply from the emulator."""
    import openai

    _, adapter, _ = rig
    client = openai.AsyncOpenAI(api_key="test-key", base_url=adapter.url.rsplit("/", 2)[0])
    stream = await client.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "sdk says hi"}],
        stream=True, stream_options={"include_usage": True})
    text = [c.choices[0].delta.content or "" async for c in stream if c.choices]
    await client.close()
    assert "".join(text) == "You said: sdk says hi"


async def test_conversation_shows_a_replay_from_zero(rig: Rig) -> None:
    """What a request replays equals the committed history in neutral form, plus the turn."""
    emulator, adapter, _ = rig
    call = make_call("weather? [[call:weather]]")
    _, first = await run(rig, call)
    assert isinstance(first, ProviderResponse)
    results = [ToolResultPart(call_id=c.call_id, name=c.name, output="cold")
               for c in first.tool_calls]
    _, final = await run(rig, attrs.evolve(call, loop_messages=adapter.extend_loop(
        call, first, results)))
    assert isinstance(final, ProviderResponse)
    now = datetime(2026, 1, 1, tzinfo=UTC)
    history = tuple(Message(id=f"m{i}", chat_id="c", seq=i, role=role,
                            status=MessageStatus.COMPLETED, parts=parts, created_at=now,
                            updated_at=now)
                    for i, (role, parts) in enumerate(
                        [(Role.USER, (TextPart(text=call.user_text),)),
                         (Role.ASSISTANT, (*first.parts, *results, *final.parts))], 1))
    await run(rig, make_call("thanks", history=history))
    assert emulator.conversation() == [*items_from_messages(history),
                                       Item(kind="user", text="thanks")]
