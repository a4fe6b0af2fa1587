"""A response refused for asking more tool calls than ``TurnLimits.max_tool_calls`` is
billed all the same: its usage stays on the turn's bill. The refusal was raised once the
response was in, after the stream's last attempt, so the cut path (``provider_batches``'
``cuts``) never saw it, and the turn aborted with usage 0 and no cost. Since wire10 it is
raised as the call past the limit streams, a cut: the bill is what the stream said."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.engine.support import FakeClock, collect, make_turn, tool
from tests.faults.hostile import sse_server
from tests.faults.rig import quick_transport
from turnstate.emulators._emulated import kind_of
from turnstate.engine import TurnEngine, TurnLimits
from turnstate.storage import MemoryStore

CALLS = 5


def _chat_frames() -> list[tuple[str, dict[str, Any]]]:
    frames: list[tuple[str, dict[str, Any]]] = [("message", {"id": "r", "choices": [{
        "index": 0, "delta": {"tool_calls": [{"index": i, "id": f"c{i}", "type": "function",
                                              "function": {"name": "f", "arguments": "{}"}}]}}]})
        for i in range(CALLS)]
    frames.append(("message", {"id": "r", "choices": [
        {"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}))
    frames.append(("message", {"id": "r", "choices": [], "usage": {
        "prompt_tokens": 1000, "completion_tokens": 500, "total_tokens": 1500,
        "prompt_cache_hit_tokens": 0, "prompt_cache_miss_tokens": 1000}}))  # DeepSeek's
    return frames


def _anthropic_frames() -> list[tuple[str, dict[str, Any]]]:
    frames: list[tuple[str, dict[str, Any]]] = [("message_start", {
        "type": "message_start", "message": {
            "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
            "content": [], "stop_reason": None,
            "usage": {"input_tokens": 1000, "output_tokens": 1}}})]
    for i in range(CALLS):
        frames.append(("content_block_start", {
            "type": "content_block_start", "index": i, "content_block": {
                "type": "tool_use", "id": f"toolu_{i}", "name": "f", "input": {}}}))
        frames.append(("content_block_delta", {
            "type": "content_block_delta", "index": i,
            "delta": {"type": "input_json_delta", "partial_json": "{}"}}))
        frames.append(("content_block_stop", {"type": "content_block_stop", "index": i}))
    frames.append(("message_delta", {"type": "message_delta", "delta": {
        "stop_reason": "tool_use"}, "usage": {"output_tokens": 500}}))
    frames.append(("message_stop", {"type": "message_stop"}))
    return frames


CASES = {"openai-compatible": ("gpt-4o-mini", _chat_frames),
         "deepseek": ("deepseek-chat", _chat_frames),
         "anthropic": ("claude-sonnet-4-5", _anthropic_frames)}


@pytest.mark.parametrize("provider", sorted(CASES))
async def test_a_response_refused_for_its_tool_calls_keeps_its_bill(provider: str) -> None:
    model, frames = CASES[provider]
    body = b"".join(f"event: {name}\ndata: {json.dumps(frame)}\n\n".encode()
                    for name, frame in frames())
    if provider != "anthropic":
        body += b"data: [DONE]\n\n"
    store = MemoryStore(clock=FakeClock())
    chat = await store.create_chat(owner="bill")
    finals = []
    async with sse_server(body) as base_url, quick_transport() as transport:
        adapter = kind_of(provider).adapter(base_url=base_url, api_key="k")
        # the response refused, then the same response taken (the tool loop's limit of
        # 0 aborts the turn after it, its bill in full): the two bills are equal
        for limits, iterations in ((TurnLimits(max_tool_calls=CALLS - 1), 8),
                                   (TurnLimits(), 0)):
            engine = TurnEngine(store, {provider: adapter}, transport, clock=FakeClock(),
                                limits=limits)
            outcome = await collect(engine.run_turn(chat.id, make_turn(
                "hi", provider=provider, model=model, tools=(tool("f"),),
                tool_iteration_limit=iterations)))
            finals.append(outcome.final)
    refused, taken = finals
    assert refused.type == "turn_aborted" and refused.reason == "provider_failed"
    assert "max_tool_calls" in (refused.detail or "")
    assert taken.type == "turn_aborted" and taken.reason == "tool_iteration_limit"
    # Since wire10 the refusal comes as the fifth call streams, not once the response
    # is whole: the stream is cut there, and its bill is what it said so far, as any
    # cut's (``absorb_cuts``): Anthropic's ``message_start`` input and the output
    # estimated over what streamed; a Chat Completions stream, whose usage comes last,
    # leaves the turn without a cost, never the $0 of nothing known.
    usage = refused.stats.usage
    if provider == "anthropic":
        assert usage.input_tokens == 1000 and 0 < usage.output_tokens <= 500, usage
        assert refused.stats.cost is not None
    else:
        assert refused.stats.cost is None
    assert (taken.stats.usage.input_tokens, taken.stats.usage.output_tokens) == (1000, 500)
    assert (await store.load_chat(chat.id)).active_turn_id is None
