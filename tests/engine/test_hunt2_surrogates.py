"""A model's output with surrogate code points is made UTF-8 text when its response
ends, so the requests that send it back can be built.

A JSON escape decodes to a surrogate code point: an emoji sent as ``\\ud83d\\ude00``
split across two deltas (each half its own frame) joins into two code points, not the
emoji, and a lone ``\\ud800`` is one. The turn committed them; then every later
request that replays the chat (each turn of a stateless provider, Anthropic's or
Chat Completions') failed to encode its body ("could not build the request:
UnicodeEncodeError"), so the chat could not go on. Within a turn, a tool call whose
name or arguments held one failed the tool loop's next request the same way.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator
from typing import Any

import pytest

from tests.engine.support import collect, make_turn, tool
from turnstate.core import ProviderError
from turnstate.engine import TurnEngine
from turnstate.providers import (
    AnthropicAdapter,
    ChatCompletionsAdapter,
    ErrorClassifier,
    HttpRequest,
    SseEvent,
)
from turnstate.storage import MemoryStore

ADAPTERS = {"anthropic": AnthropicAdapter(base_url="http://127.0.0.1:1/v1", api_key="k"),
            "openai-compatible": ChatCompletionsAdapter(base_url="http://127.0.0.1:1/v1",
                                                        api_key="k")}
MODELS = {"anthropic": "claude-sonnet-4-5", "openai-compatible": "gpt-4o-mini"}


class Replies:
    """A transport answering each request with the next stream of ``streams``."""

    def __init__(self, *streams: list[SseEvent]) -> None:
        self.streams = list(streams)
        self.bodies: list[bytes] = []

    async def stream(self, request: HttpRequest, classify: ErrorClassifier
                     ) -> AsyncGenerator[SseEvent, None]:
        self.bodies.append(request.body)
        for event in self.streams.pop(0):
            yield event

    async def before_restart(self, restarts: int, error: ProviderError) -> bool:
        return False


def chat_text(*deltas: str) -> list[SseEvent]:
    chunk = {"id": "c1", "object": "chat.completion.chunk", "model": "gpt-4o-mini"}
    return [*(SseEvent(data=json.dumps({**chunk, "choices": [
                {"index": 0, "delta": {"content": d}, "finish_reason": None}]}))
              for d in deltas),
            SseEvent(data=json.dumps({**chunk, "choices": [
                {"index": 0, "delta": {}, "finish_reason": "stop"}]})),
            SseEvent(data="[DONE]")]


def chat_call(name: str, arguments: str) -> list[SseEvent]:
    chunk = {"id": "c1", "object": "chat.completion.chunk", "model": "gpt-4o-mini"}
    call = {"index": 0, "id": "call_1", "type": "function",
            "function": {"name": name, "arguments": arguments}}
    return [SseEvent(data=json.dumps({**chunk, "choices": [
                {"index": 0, "delta": {"tool_calls": [call]}, "finish_reason": None}]})),
            SseEvent(data=json.dumps({**chunk, "choices": [
                {"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})),
            SseEvent(data="[DONE]")]


def anthropic_text(*deltas: str) -> list[SseEvent]:
    def frame(data: dict[str, Any]) -> SseEvent:
        return SseEvent(data=json.dumps(data), event=data["type"])
    return [frame({"type": "message_start", "message": {
                "id": "msg_1", "type": "message", "role": "assistant", "content": [],
                "model": "claude-sonnet-4-5", "usage": {"input_tokens": 5, "output_tokens": 1}}}),
            frame({"type": "content_block_start", "index": 0,
                   "content_block": {"type": "text", "text": ""}}),
            *(frame({"type": "content_block_delta", "index": 0,
                     "delta": {"type": "text_delta", "text": d}}) for d in deltas),
            frame({"type": "content_block_stop", "index": 0}),
            frame({"type": "message_delta", "delta": {"stop_reason": "end_turn"},
                   "usage": {"output_tokens": 3}}),
            frame({"type": "message_stop"})]


STREAMS = {"anthropic": anthropic_text, "openai-compatible": chat_text}


@pytest.mark.parametrize("provider", sorted(STREAMS))
@pytest.mark.parametrize(("deltas", "kept"), [
    (("a \ud83d", "\ude00 b"), "a \U0001f600 b"),  # an emoji's halves in two deltas
    (("lone \ud800 high",), "lone \ufffd high"),
    (("lone \udfff low",), "lone \ufffd low"),
])
async def test_a_reply_with_surrogates_is_kept_as_utf8_and_the_chat_goes_on(
        provider: str, deltas: tuple[str, ...], kept: str) -> None:
    store = MemoryStore()
    reply = STREAMS[provider]
    transport = Replies(reply(*deltas), reply("fine"))
    engine = TurnEngine(store, ADAPTERS, transport)  # type: ignore[arg-type]
    chat = await store.create_chat(owner="alice")
    turn = make_turn(provider=provider, model=MODELS[provider], tools=())
    first = await collect(engine.run_turn(chat.id, turn))
    assert first.final.type == "turn_completed"
    assert first.final.text == kept
    history = await store.load_history(chat.id)
    assert history[-1].parts[0].text == kept  # type: ignore[union-attr]
    second = await collect(engine.run_turn(chat.id, turn))
    assert second.final.type == "turn_completed", second.final
    assert kept.encode() in transport.bodies[1]  # the answer, sent back as UTF-8


@pytest.mark.parametrize(("name", "arguments"), [
    ("weather", '{"city": "Par\ud800is"}'),
    ("wea\udfffther", '{"city": "Paris"}'),
])
async def test_a_tool_call_with_a_lone_surrogate_does_not_break_the_tool_loop(
        name: str, arguments: str) -> None:
    store = MemoryStore()
    transport = Replies(chat_call(name, arguments), chat_text("done"))
    engine = TurnEngine(store, ADAPTERS, transport)  # type: ignore[arg-type]
    chat = await store.create_chat(owner="alice")
    turn = make_turn(provider="openai-compatible", model="gpt-4o-mini",
                     tools=(tool("weather"),))
    outcome = await collect(engine.run_turn(chat.id, turn))
    assert outcome.final.type == "turn_completed", outcome.final
    assert len(transport.bodies) == 2
