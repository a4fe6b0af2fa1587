"""An answer the provider's content filter stopped ends the turn with what it said, as a
length stop does: the tool calls in it are dropped (never run, listed in the audit), and
a durable cursor is not kept for a response whose calls would have no outputs."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aiohttp import web

from tests.engine.support import FakeClock, collect, make_turn, tool
from tests.faults.hostile import hostile_server
from tests.faults.rig import quick_transport
from turnstate.core._conversation import ToolCallPart
from turnstate.core._events import TurnCompleted
from turnstate.emulators._emulated import kind_of
from turnstate.engine import TurnEngine
from turnstate.engine._outcome import cut_at_length
from turnstate.providers._protocol import ProviderResponse
from turnstate.storage import MemoryStore, decode_audit

RAN: list[dict[str, Any]] = []


async def _weather(args: dict[str, Any]) -> Any:
    RAN.append(args)
    return {"sky": "clear"}


def _chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
    frame = {"id": "chatcmpl-cf", "object": "chat.completion.chunk", "created": 1770000000,
             "model": "gpt-4o-mini",
             "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    return b"data: " + json.dumps(frame).encode() + b"\n\n"


async def _filtered_call(response: web.StreamResponse) -> None:
    """Chat Completions: some text, one whole call, then ``content_filter``."""
    await response.write(_chunk({"role": "assistant", "content": "Checking "}))
    await response.write(_chunk({"tool_calls": [{
        "index": 0, "id": "call_cf", "type": "function",
        "function": {"name": "weather", "arguments": '{"city": "Oslo"}'}}]}))
    await response.write(_chunk({}, "content_filter"))
    usage = {"id": "chatcmpl-cf", "object": "chat.completion.chunk", "created": 1770000000,
             "model": "gpt-4o-mini", "choices": [],
             "usage": {"prompt_tokens": 20, "completion_tokens": 5, "total_tokens": 25}}
    await response.write(b"data: " + json.dumps(usage).encode() + b"\n\ndata: [DONE]\n\n")


async def test_a_filtered_answer_runs_none_of_its_calls() -> None:
    RAN.clear()
    store = MemoryStore(clock=FakeClock())
    chat = await store.create_chat(owner="o")
    async with hostile_server(_filtered_call) as base_url, quick_transport() as transport:
        adapter = kind_of("openai-compatible").adapter(base_url=base_url, api_key="cf-key")
        engine = TurnEngine(store, {"openai-compatible": adapter}, transport,
                            clock=FakeClock())
        outcome = await collect(engine.run_turn(chat.id, make_turn(
            "weather?", provider="openai-compatible", model="gpt-4o-mini",
            tools=(tool("weather", _weather),))))
    final = outcome.final
    assert isinstance(final, TurnCompleted), final
    assert final.finish_reason == "content_filter" and final.text == "Checking "
    assert RAN == [] and final.stats.tool_calls == 0 and final.stats.requests == 1
    last = (await store.load_history(chat.id))[-1]
    assert not any(isinstance(p, ToolCallPart) for p in last.parts)
    assert last.provider_state is not None
    dropped = (decode_audit(last.provider_state).metadata or {})["droppedToolCalls"]
    assert [(c["name"], c["reason"]) for c in dropped] == [("weather", "content_filter")]


@pytest.mark.parametrize("finish", ["length", "content_filter"])
def test_a_cut_finish_drops_every_call(finish: str) -> None:
    call = ToolCallPart(call_id="c1", name="weather", arguments='{"city": "Oslo"}')
    response = ProviderResponse(response_id=None, parts=(call,), finish_reason=finish,
                                raw_finish_reason=finish)
    kept, dropped = cut_at_length(response)
    assert kept.parts == () and [d["id"] for d in dropped] == ["c1"]


@pytest.mark.parametrize("finish", ["stop", "tool_calls", "refusal", "other", None])
def test_other_finishes_keep_their_calls(finish: str | None) -> None:
    call = ToolCallPart(call_id="c1", name="weather", arguments='{"city": "Oslo"}')
    response = ProviderResponse(response_id=None, parts=(call,), finish_reason=finish)
    assert cut_at_length(response) == (response, [])
