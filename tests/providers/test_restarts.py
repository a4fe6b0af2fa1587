"""Retries until user-visible output (issue 24, item 7): ``provider_batches`` restarts a
call whose stream failed retryably after events that showed nothing, and never once
text, reasoning or a tool call has streamed. Streams are hand-written from the
providers' streaming docs; the transport is a stand-in that plays them in order."""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator
from typing import Any

import pytest

from tests.helpers import provider_stream
from turnstate.core._decisions import Strategy
from turnstate.core._errors import ProviderError, TransientProviderError
from turnstate.core._registry import DEFAULT_REGISTRY
from turnstate.emulators import AnthropicEmulator, EmulatorServer, Fault
from turnstate.providers._protocol import (
    ErrorClassifier,
    HttpRequest,
    ProviderCall,
    SseEvent,
    TextDelta,
)
from turnstate.providers._transport import AiohttpTransport, RetryPolicy
from turnstate.providers.anthropic import AnthropicAdapter
from turnstate.providers.chat_completions import ChatCompletionsAdapter
from turnstate.providers.openai_responses import OpenAIResponsesAdapter


def named(kind: str, **fields: Any) -> SseEvent:
    return SseEvent(event=kind, data=json.dumps({"type": kind, **fields}))


MESSAGE_START = named("message_start", message={
    "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
    "content": [], "stop_reason": None, "usage": {"input_tokens": 5, "output_tokens": 1}})
OVERLOADED = named("error", error={"type": "overloaded_error", "message": "Overloaded"})
ANSWER = [
    MESSAGE_START,
    named("content_block_start", index=0, content_block={"type": "text", "text": ""}),
    named("content_block_delta", index=0, delta={"type": "text_delta", "text": "Hi."}),
    named("content_block_stop", index=0),
    named("message_delta", delta={"stop_reason": "end_turn"}, usage={"output_tokens": 2}),
    named("message_stop"),
]


class PlayedTransport:
    """Plays one scripted stream per attempt; records the restarts it allowed."""

    def __init__(self, *attempts: list[SseEvent], allow: int = 2) -> None:
        self.attempts = list(attempts)
        self.sent = 0
        self.restarts: list[int] = []
        self.allow = allow

    async def stream(self, request: HttpRequest,
                     classify: ErrorClassifier) -> AsyncGenerator[SseEvent, None]:
        events = self.attempts[self.sent]
        self.sent += 1
        for event in events:
            yield event

    async def before_restart(self, restarts: int, error: ProviderError) -> bool:
        self.restarts.append(restarts)
        return restarts <= self.allow


async def run(adapter: Any, transport: Any) -> list[Any]:
    request = HttpRequest(method="POST", url="http://x/v1/messages", headers={}, body=b"{}",
                          provider=adapter.provider)
    return [item async for item in provider_stream(transport, adapter, request)]


async def test_overloaded_after_message_start_and_ping_is_restarted() -> None:
    """Anthropic's ``overloaded_error`` after ``message_start`` and ``ping`` (no text
    yet): the call is sent again with a fresh parser, and the second answer is whole."""
    transport = PlayedTransport([MESSAGE_START, named("ping"), OVERLOADED], ANSWER)
    items = await run(AnthropicAdapter(api_key="k"), transport)
    assert transport.sent == 2 and transport.restarts == [1]
    assert items[0] == TextDelta(text="Hi.")
    assert items[-1].parts[0].text == "Hi."


async def test_created_then_error_is_restarted_for_responses() -> None:
    """OpenAI's ``response.created`` followed by an ``error`` event is retried too."""
    created = SseEvent(event="response.created", data=json.dumps({
        "type": "response.created", "response": {"id": "resp_1", "status": "in_progress"}}))
    error = SseEvent(event="error", data=json.dumps({
        "type": "error", "code": "server_error", "message": "boom", "param": None}))
    done = SseEvent(event="response.completed", data=json.dumps({
        "type": "response.completed", "response": {
            "id": "resp_2", "status": "completed", "model": "gpt-5", "output": [
                {"type": "message", "id": "msg_1", "role": "assistant",
                 "content": [{"type": "output_text", "text": "ok"}]}]}}))
    transport = PlayedTransport([created, error], [done])
    items = await run(OpenAIResponsesAdapter(api_key="k"), transport)
    assert transport.restarts == [1] and items[-1].response_id == "resp_2"


async def test_error_after_text_is_not_restarted() -> None:
    """Text has streamed: the error is raised, no restart is asked for."""
    transport = PlayedTransport([*ANSWER[:3], OVERLOADED], ANSWER)
    with pytest.raises(TransientProviderError, match="Overloaded"):
        await run(AnthropicAdapter(api_key="k"), transport)
    assert transport.sent == 1 and transport.restarts == []


async def test_error_after_a_tool_call_fragment_is_not_restarted() -> None:
    """A tool call's first fragment counts as output (the parser's ``output_started``)."""
    chunk = SseEvent(data=json.dumps({"id": "c1", "object": "chat.completion.chunk",
                                      "model": "m", "choices": [{"index": 0, "delta": {
                                          "tool_calls": [{"index": 0, "id": "call_1",
                                                          "function": {"name": "weather",
                                                                       "arguments": ""}}]},
                                          "finish_reason": None}]}))
    error = SseEvent(data=json.dumps({"error": {"message": "overloaded", "type": "overloaded",
                                                "code": "overloaded"}}))
    transport = PlayedTransport([chunk, error], [])
    with pytest.raises(TransientProviderError):
        await run(ChatCompletionsAdapter(api_key="k"), transport)
    assert transport.restarts == []


async def test_restarts_stop_when_the_policy_says_so() -> None:
    """Every attempt fails before output: restarts until the policy refuses."""
    failing = [MESSAGE_START, OVERLOADED]
    transport = PlayedTransport(failing, failing, failing, allow=2)
    with pytest.raises(TransientProviderError):
        await run(AnthropicAdapter(api_key="k"), transport)
    assert transport.sent == 3 and transport.restarts == [1, 2, 3]


async def test_aiohttp_transport_counts_restarts_against_max_attempts() -> None:
    """``before_restart`` allows ``max_attempts - 1`` restarts, waiting the backoff."""
    slept: list[float] = []

    async def sleep(delay: float) -> None:
        slept.append(delay)

    transport = AiohttpTransport(retry=RetryPolicy(max_attempts=3, base_delay=1.0, jitter=0.0),
                                 sleep=sleep)
    error = TransientProviderError("anthropic", "Overloaded")
    assert [await transport.before_restart(n, error) for n in (1, 2, 3)] == [True, True, False]
    assert slept == [1.0, 2.0]
    await transport.aclose()


# --- one budget per call (issue 24, wire round three: retries and restarts) --------------

OVERLOADED_FRAME = ('event: error\ndata: {"type": "error", "error": {"type": '
                    '"overloaded_error", "message": "Overloaded"}}\n\n')
HTTP_529 = Fault(status=529, body={"type": "error", "error": {
    "type": "overloaded_error", "message": "Overloaded"}})
AFTER_START = Fault(frame_after=1, frame=OVERLOADED_FRAME)  # message_start, then the error


async def _no_sleep(_: float) -> None:
    return None


async def _call_over_loopback(emulator: AnthropicEmulator, max_attempts: int) -> list[Any]:
    call = ProviderCall(strategy=Strategy.LOCAL_LOOP, system_prompt="sys", user_text="hi",
                        tools=(),
                        model=DEFAULT_REGISTRY.model("anthropic", "claude-sonnet-4-5"))
    async with EmulatorServer(emulator) as server, AiohttpTransport(
            retry=RetryPolicy(max_attempts=max_attempts), sleep=_no_sleep) as transport:
        adapter = AnthropicAdapter(base_url=server.base_url + AnthropicEmulator.API_PREFIX,
                                   api_key="k")
        request = adapter.build_request(call)
        return [item async for item in provider_stream(transport, adapter, request)]


@pytest.mark.parametrize("max_attempts", [2, 3, 4])
async def test_retries_and_restarts_share_one_budget_per_call(max_attempts: int) -> None:
    """The worst case: every stream fails before its first event until the transport's
    last retry, which fails after ``message_start`` (a restart). Without a shared budget
    that was ``max_attempts`` streams of ``max_attempts`` requests each; now the call
    sends ``max_attempts`` requests in all, counted at the emulator."""
    emulator = AnthropicEmulator()
    stream = [HTTP_529] * (max_attempts - 1) + [AFTER_START]
    emulator.faults.push(*stream * max_attempts)
    with pytest.raises(TransientProviderError):
        await _call_over_loopback(emulator, max_attempts)
    assert len(emulator.requests) == max_attempts


async def test_a_restart_then_a_retry_still_completes_within_the_budget() -> None:
    """Restarted after ``message_start``, retried after a 529, answered: three requests."""
    emulator = AnthropicEmulator()
    emulator.faults.push(AFTER_START, HTTP_529)
    items = await _call_over_loopback(emulator, 3)
    assert len(emulator.requests) == 3
    assert items[-1].parts[0].text == "You said: hi"
