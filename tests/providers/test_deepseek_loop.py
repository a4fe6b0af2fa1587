"""A DeepSeek thinking tool loop, driven by a small test loop against the emulator.

The loop is what the engine's driver does for a stateless provider: call, run the
tools, ``extend_loop``, call again until no tool calls remain; then commit the turn's
parts as one assistant message that later turns replay.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import aiohttp
import attrs
import pytest

from turnstate.core._conversation import (
    Message,
    MessageStatus,
    Part,
    Role,
    TextPart,
    ToolResultPart,
    ToolSpec,
)
from turnstate.core._decisions import Strategy
from turnstate.core._registry import DEFAULT_REGISTRY, ModelInfo, ReasoningReplay
from turnstate.emulators import DeepSeekEmulator
from turnstate.emulators._base import EmulatorServer
from turnstate.providers._protocol import ProviderCall, ProviderResponse
from turnstate.providers._sse import SseDecoder
from turnstate.providers.chat_completions import ChatCompletionsAdapter
from turnstate.providers.deepseek import DeepSeekAdapter

NOW = datetime(2026, 1, 1, tzinfo=UTC)
REASONER = ModelInfo(provider="deepseek", name="deepseek-v3.2-reasoner", context_limit=128_000,
                     thinking=True, reasoning_replay=ReasoningReplay.TURN)
"""V3.2's rules, as a deployment still on V3.2 registers them (the registry's names
follow V4: deepseek-reasoner is an alias of deepseek-v4-flash)."""
V4 = DEFAULT_REGISTRY.model("deepseek", "deepseek-v4-flash")
TOOLS = (ToolSpec(name="weather", parameters={"type": "object", "properties": {
    "city": {"type": "string"}}}),)


class HttpError(Exception):
    def __init__(self, status: int, body: bytes) -> None:
        super().__init__(f"HTTP {status}: {body[:200]!r}")
        self.status = status
        self.body = json.loads(body)


@attrs.define
class Loop:
    """The test loop: one adapter, one emulator, committed history kept in memory."""

    adapter: ChatCompletionsAdapter
    session: aiohttp.ClientSession
    model: ModelInfo
    history: list[Message] = attrs.field(factory=list)

    async def call(self, call: ProviderCall) -> ProviderResponse:
        request = self.adapter.build_request(call)
        async with self.session.post(request.url, data=request.body,
                                     headers=dict(request.headers)) as response:
            raw = await response.read()
        if response.status != 200:
            raise HttpError(response.status, raw)
        parser = self.adapter.stream_parser()
        for event in SseDecoder().feed(raw):
            parser.feed(event)
        return parser.finish()

    async def turn(self, text: str) -> list[ProviderResponse]:
        """Run one user turn to its final answer and commit it."""
        call = ProviderCall(strategy=Strategy.LOCAL_LOOP, model=self.model,
                            system_prompt="You are terse.", tools=TOOLS,
                            history=tuple(self.history), user_text=text)
        responses: list[ProviderResponse] = []
        parts: list[Part] = []
        while True:
            response = await self.call(call)
            responses.append(response)
            parts.extend(response.parts)
            if not response.tool_calls:
                break
            results = [ToolResultPart(call_id=c.call_id, name=c.name, output=f"cold {i}")
                       for i, c in enumerate(response.tool_calls)]
            parts.extend(results)
            call = attrs.evolve(call, loop_messages=self.adapter.extend_loop(
                call, response, results), iteration=call.iteration + 1)
        seq = len(self.history)
        self.history += [self._message(seq + 1, Role.USER, (TextPart(text=text),)),
                         self._message(seq + 2, Role.ASSISTANT, tuple(parts))]
        return responses

    @staticmethod
    def _message(seq: int, role: Role, parts: tuple[Part, ...]) -> Message:
        return Message(id=f"m{seq}", chat_id="c", seq=seq, role=role,
                       status=MessageStatus.COMPLETED, parts=parts, created_at=NOW,
                       updated_at=NOW)


@pytest.fixture
async def served() -> AsyncIterator[tuple[DeepSeekEmulator, str, aiohttp.ClientSession]]:
    emulator = DeepSeekEmulator()
    async with EmulatorServer(emulator) as server, aiohttp.ClientSession() as session:
        yield emulator, server.base_url + DeepSeekEmulator.API_PREFIX, session


Served = tuple[DeepSeekEmulator, str, aiohttp.ClientSession]


def assistants(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [m for m in body["messages"] if m["role"] == "assistant"]


@pytest.mark.parametrize("model", [REASONER, V4], ids=["v3.2-turn", "v4-tool-turns"])
async def test_thinking_tool_loop_passes_the_rules(served: Served, model: ModelInfo) -> None:
    """Two thinking tool rounds pass the emulator's reasoning_content rules for both sets."""
    emulator, base, session = served
    loop = Loop(adapter=DeepSeekAdapter(base_url=base, api_key="k"), session=session,
                model=model)
    responses = await loop.turn("weather? [[think]] [[call:weather]] [[rounds:2]]")
    assert [r.finish_reason for r in responses] == ["tool_calls", "tool_calls", "stop"]
    assert len(emulator.requests) == 3
    sent_back = [m["reasoning_content"] for m in assistants(emulator.requests[2].json)]
    assert sent_back == ["Thinking about 'weather?' (round 0).",
                         "Thinking about 'weather?' (round 1)."]
    assert responses[-1].parts[-1] == TextPart(text="Tool results: weather=cold 0; weather=cold 0.")
    hits = [r.usage.cache_hit_tokens for r in responses]
    assert hits[0] == 0 and all(h and h > 0 for h in hits[1:])


async def test_turn_model_drops_reasoning_at_the_next_user_turn(served: Served) -> None:
    """After a V3.2 (TURN) tool loop, the next turn sends no reasoning_content at all."""
    emulator, base, session = served
    loop = Loop(adapter=DeepSeekAdapter(base_url=base), session=session, model=REASONER)
    await loop.turn("weather? [[think]] [[call:weather]]")
    await loop.turn("and tomorrow? [[think]]")
    following = emulator.requests[-1].json
    assert len(assistants(following)) == 2
    assert "reasoning_content" not in json.dumps(following["messages"])


async def test_tool_turns_model_keeps_tool_turn_reasoning(served: Served) -> None:
    """After a V4 (TOOL_TURNS) tool loop, tool-call messages keep their reasoning, others ""."""
    emulator, base, session = served
    loop = Loop(adapter=DeepSeekAdapter(base_url=base), session=session, model=V4)
    await loop.turn("weather? [[think]] [[call:weather]]")
    await loop.turn("and tomorrow?")
    await loop.turn("thanks")
    history = assistants(emulator.requests[-1].json)
    assert [(bool(m.get("tool_calls")), m["reasoning_content"]) for m in history] == [
        (True, "Thinking about 'weather?' (round 0)."), (False, ""), (False, "")]


@pytest.mark.parametrize(("model", "message"), [
    (REASONER, "Missing `reasoning_content` field in the assistant message at message index 2"),
    (V4, "The `reasoning_content` in the thinking mode must be passed back to the API."),
], ids=["v3.2", "v4"])
async def test_a_codec_that_drops_reasoning_is_rejected(
    served: Served, model: ModelInfo, message: str
) -> None:
    """Plain Chat Completions rendering (no reasoning back) fails DeepSeek's rules."""
    _, base, session = served
    plain = ChatCompletionsAdapter(base_url=base)
    loop = Loop(adapter=plain, session=session, model=model)
    with pytest.raises(HttpError) as caught:
        await loop.turn("weather? [[think]] [[call:weather]]")
    assert caught.value.status == 400
    assert caught.value.body["error"]["message"] == message
