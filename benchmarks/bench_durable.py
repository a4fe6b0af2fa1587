"""Durable-cursor providers: stream parsing cost and request bytes (DESIGN.md section 9).

(a) Parser time per streamed text delta. The baseline is reading the same raw stream:
    SSE-decoding its bytes (4 KiB network chunks) into events. The measured figure is
    decoding plus ``StreamParser.feed`` for every event plus ``finish``. The difference
    is what the codec adds per delta (the engine-level figure is measured elsewhere).
(b) Request bytes per turn over a 30-turn conversation with tools, built by the codecs
    from a synthetic growing history: cursor mode (``previous_response_id`` /
    ``previous_interaction_id`` plus the new input) against replay mode (the whole
    committed history every turn; a tool continuation then chains by cursor, as the
    driver does after a replay). Budget: cursor <= 10% of replay.

Run: ``python benchmarks/bench_durable.py``.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._util import figure, ratio
from turnstate.core._conversation import (
    Message,
    MessageStatus,
    Part,
    Role,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    ToolSpec,
)
from turnstate.core._decisions import Strategy
from turnstate.core._registry import DEFAULT_REGISTRY, ModelInfo
from turnstate.engine._driver import TurnEngine
from turnstate.engine._turn_input import TurnInput
from turnstate.providers import ProviderAdapter, ProviderCall, StreamParser
from turnstate.providers._sse import SseDecoder
from turnstate.providers.gemini_interactions import GeminiInteractionsAdapter
from turnstate.providers.openai_responses import OpenAIResponsesAdapter
from turnstate.storage import MemoryStore

DELTAS = 5_000
CHUNK = 4096
REPEAT = 15
TURNS = 30
NOW = datetime(2026, 12, 2, tzinfo=UTC)


# --- (a) parsing ---------------------------------------------------------------------


def _frame(event: str, payload: dict[str, Any]) -> bytes:
    data = json.dumps(payload, separators=(",", ":"), ensure_ascii=False)
    return f"event: {event}\ndata: {data}\n\n".encode()


def openai_stream(deltas: int) -> bytes:
    """A Responses stream shaped like the recorded ones (item ids, obfuscation padding)."""
    rid, mid = "resp_" + "0e2ed64344ac7f31" * 3, "msg_" + "0e2ed64344ac7f31" * 3
    response = {"id": rid, "object": "response", "status": "in_progress", "model": "gpt-5",
                "output": [], "usage": None}
    out = [_frame("response.created", {"type": "response.created", "sequence_number": 0,
                                       "response": response}),
           _frame("response.output_item.added", {
               "type": "response.output_item.added", "output_index": 0, "item": {
                   "id": mid, "type": "message", "status": "in_progress", "content": [],
                   "role": "assistant"}})]
    words = []
    for i in range(deltas):
        word = f" word{i % 97}"
        words.append(word)
        out.append(_frame("response.output_text.delta", {
            "type": "response.output_text.delta", "content_index": 0, "delta": word,
            "item_id": mid, "logprobs": [], "obfuscation": "NBzQFZHtY7Dwh",
            "output_index": 0, "sequence_number": i + 2}))
    item = {"id": mid, "type": "message", "status": "completed", "role": "assistant",
            "content": [{"type": "output_text", "text": "".join(words), "annotations": []}]}
    out.append(_frame("response.output_item.done", {
        "type": "response.output_item.done", "output_index": 0, "item": item}))
    done = {**response, "status": "completed", "output": [item], "usage": {
        "input_tokens": 10, "output_tokens": deltas, "input_tokens_details": {
            "cached_tokens": 0}, "output_tokens_details": {"reasoning_tokens": 0}}}
    out.append(_frame("response.completed", {"type": "response.completed", "response": done}))
    return b"".join(out)


def gemini_stream(deltas: int) -> bytes:
    """An Interactions stream: one model_output step with many text deltas."""
    iid = "v1_ChdUR3NIYXVyQkFlYVA2ZGtQajZERThBVRIXVEdzSGF1ckJBZWFQNmRrUGo2REU4QVU"
    head = {"id": iid, "status": "in_progress", "object": "interaction", "model": "gemini"}
    out = [_frame("interaction.created", {"interaction": head,
                                          "event_type": "interaction.created"}),
           _frame("step.start", {"index": 0, "step": {"type": "model_output"},
                                 "event_type": "step.start"})]
    for i in range(deltas):
        out.append(_frame("step.delta", {"index": 0, "delta": {
            "text": f" word{i % 97}", "type": "text"}, "event_type": "step.delta"}))
    out.append(_frame("step.stop", {"index": 0, "event_type": "step.stop"}))
    out.append(_frame("interaction.completed", {"interaction": {
        **head, "status": "completed", "usage": {"total_input_tokens": 10,
                                                 "total_output_tokens": deltas}},
        "event_type": "interaction.completed"}))
    out.append(b"event: done\ndata: [DONE]\n\n")
    return b"".join(out)


def _chunks(data: bytes) -> list[bytes]:
    return [data[i:i + CHUNK] for i in range(0, len(data), CHUNK)]


def read_only(chunks: list[bytes]) -> int:
    decoder = SseDecoder()
    count = 0
    for chunk in chunks:
        count += len(decoder.feed(chunk))
    return count


def read_and_parse(chunks: list[bytes], parser: StreamParser) -> int:
    decoder = SseDecoder()
    count = 0
    for chunk in chunks:
        for event in decoder.feed(chunk):
            count += len(parser.feed(event))
    parser.finish()
    return count


def per_delta_us(fn: Callable[[], int]) -> float:
    samples = []
    for _ in range(REPEAT):
        start = time.perf_counter_ns()
        fn()
        samples.append(time.perf_counter_ns() - start)
    return statistics.median(samples) / 1000 / DELTAS


def bench_parsing(name: str, stream: bytes, adapter: ProviderAdapter) -> None:
    chunks = _chunks(stream)
    assert read_and_parse(chunks, adapter.stream_parser()) == DELTAS
    baseline = per_delta_us(lambda: read_only(chunks))
    parsed = per_delta_us(lambda: read_and_parse(chunks, adapter.stream_parser()))
    print(f"-- {name}: {DELTAS} text deltas, {len(stream) / 1024:.0f} KiB raw stream")
    figure(f"{name}: read raw stream (SSE decode) per delta", baseline)
    figure(f"{name}: read + parse per delta", parsed)
    figure(f"{name}: parser cost per delta (difference)", parsed - baseline)
    ratio(f"{name}: read + parse vs read", parsed, baseline)


class ReplayTransport:
    """An in-process transport that decodes a fixed byte stream, chunk by chunk."""

    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks

    async def stream(self, request: Any, classify: Any) -> Any:
        decoder = SseDecoder()
        for chunk in self.chunks:
            for event in decoder.feed(chunk):
                yield event


async def _engine_turn_us(chunks: list[bytes], adapter: ProviderAdapter) -> float:
    store = MemoryStore()
    engine = TurnEngine(store, {adapter.provider: adapter}, ReplayTransport(chunks))
    samples = []
    for _ in range(REPEAT):
        chat = await store.create_chat(owner="bench")
        turn = TurnInput(provider=adapter.provider, model="gpt-5" if adapter.provider ==
                         "openai" else "gemini-2.5-flash", system_prompt="s", user_text="u")
        start = time.perf_counter_ns()
        deltas = 0
        async for event in engine.run_turn(chat.id, turn):
            deltas += event.type == "text_delta"
        samples.append(time.perf_counter_ns() - start)
    return statistics.median(samples) / 1000


def bench_engine_streaming(name: str, build: Callable[[int], bytes],
                           adapter: ProviderAdapter) -> None:
    """Engine time per delta over reading the raw stream: a whole turn through TurnEngine
    (MemoryStore, in-process transport) with DELTAS deltas minus the same with one delta,
    against SSE-decoding the same bytes."""
    big, small = _chunks(build(DELTAS)), _chunks(build(1))
    engine_big = asyncio.run(_engine_turn_us(big, adapter))
    engine_small = asyncio.run(_engine_turn_us(small, adapter))
    read = per_delta_us(lambda: read_only(big))
    per_delta = (engine_big - engine_small) / (DELTAS - 1)
    figure(f"{name}: engine time per text delta (turn, events included)", per_delta)
    figure(f"{name}: engine time per delta over reading the raw stream", per_delta - read,
           budget=20)


# --- (b) request bytes ---------------------------------------------------------------

SYSTEM = ("You are a helpful travel assistant. Answer concisely, cite the tools you used, "
          "and ask a clarifying question when the request is ambiguous. " * 3).strip()
TOOLS = (
    ToolSpec(name="get_weather", description="Current weather and a 3-day forecast.",
             parameters={"type": "object", "properties": {
                 "city": {"type": "string", "description": "City name"},
                 "units": {"type": "string", "enum": ["metric", "imperial"]}},
                 "required": ["city"]}),
    ToolSpec(name="search_flights", description="Search flights between two airports.",
             parameters={"type": "object", "properties": {
                 "origin": {"type": "string"}, "destination": {"type": "string"},
                 "date": {"type": "string", "format": "date"}},
                 "required": ["origin", "destination", "date"]}),
    ToolSpec(name="find_hotels", description="Hotels near a place, with prices.",
             parameters={"type": "object", "properties": {
                 "near": {"type": "string"}, "max_price": {"type": "number"}},
                 "required": ["near"]}),
)


def _text(seed: int, length: int) -> str:
    words = ("trip", "museum", "weather", "station", "breakfast", "river", "ticket",
             "evening", "market", "bridge", "quiet", "budget", "walk", "window")
    out: list[str] = []
    while sum(len(w) + 1 for w in out) < length:
        out.append(words[(seed * 7 + len(out) * 3) % len(words)])
    return " ".join(out)[:length]


def synthetic_turn(turn: int, scale: int = 1,
                   ) -> tuple[str, list[Part], list[Part], list[Part]]:
    """(user text, first response parts, tool results, final parts) of one turn.

    Two turns in three use a tool: a call with ~60 bytes of arguments, a ~900 byte
    result, then a ~500 character answer; the others answer in ~700 characters.
    ``scale`` multiplies the answer lengths (for the sensitivity figures only).
    """
    user = f"Turn {turn}: " + _text(turn, 160)
    if turn % 3 == 0:
        return user, [TextPart(text=_text(turn + 1, 700 * scale))], [], []
    call = ToolCallPart(call_id=f"call_{turn:04d}", name="get_weather",
                        arguments=json.dumps({"city": f"City{turn}", "units": "metric"}))
    result = ToolResultPart(call_id=call.call_id, name=call.name, output=json.dumps(
        {"city": f"City{turn}", "forecast": [_text(turn + d, 280) for d in range(3)]}))
    return user, [call], [result], [TextPart(text=_text(turn + 2, 500 * scale))]


def message(seq: int, role: Role, parts: list[Part]) -> Message:
    return Message(id=f"m{seq}", chat_id="bench", seq=seq, role=role,
                   status=MessageStatus.COMPLETED, parts=tuple(parts), created_at=NOW,
                   updated_at=NOW)


def turn_bytes(adapter: ProviderAdapter, model: ModelInfo, cursor_mode: bool,
               scale: int = 1) -> list[int]:
    """Bytes sent per turn over the whole conversation."""
    history: list[Message] = []
    per_turn: list[int] = []
    base = {"model": model, "system_prompt": SYSTEM, "tools": TOOLS}
    for turn in range(1, TURNS + 1):
        user, first, results, final = synthetic_turn(turn, scale)
        if cursor_mode and history:
            call = ProviderCall(strategy=Strategy.CURSOR, cursor=f"cursor_{turn - 1}",
                                user_text=user, **base)  # type: ignore[arg-type]
        else:
            call = ProviderCall(strategy=Strategy.REPLAY, history=tuple(history),
                                user_text=user, **base)  # type: ignore[arg-type]
        sent = len(adapter.build_request(call).body)
        if results:
            # Both modes chain the continuation on the first response's id.
            continuation = ProviderCall(strategy=Strategy.CURSOR, cursor=f"tool_{turn}",
                                        tool_results=tuple(results), iteration=1,
                                        **base)  # type: ignore[arg-type]
            sent += len(adapter.build_request(continuation).body)
        per_turn.append(sent)
        seq = len(history)
        history.append(message(seq + 1, Role.USER, [TextPart(text=user)]))
        history.append(message(seq + 2, Role.ASSISTANT, [*first, *results, *final]))
    return per_turn


def fixed_bytes(adapter: ProviderAdapter, model: ModelInfo) -> int:
    """What every request costs before any conversation: model, instructions, tools,
    flags (a cursor request whose user text is empty, minus the cursor id)."""
    call = ProviderCall(strategy=Strategy.CURSOR, model=model, system_prompt=SYSTEM,
                        tools=TOOLS, cursor="c", user_text="")
    return len(adapter.build_request(call).body) - 1


def bench_bytes(name: str, adapter: ProviderAdapter, model: ModelInfo) -> None:
    cursor = turn_bytes(adapter, model, cursor_mode=True)
    replay = turn_bytes(adapter, model, cursor_mode=False)
    tool_turns = sum(1 for t in range(1, TURNS + 1) if t % 3)
    requests = TURNS + tool_turns
    print(f"-- {name}: request bytes over {TURNS} turns ({tool_turns} with a tool call, "
          f"{requests} requests in either mode)")
    for turn in (1, 2, 10, 20, 30):
        print(f"   turn {turn:>2}: cursor {cursor[turn - 1]:>7} B   replay "
              f"{replay[turn - 1]:>7} B")
    fixed = fixed_bytes(adapter, model)
    figure(f"{name}: cursor mode total", sum(cursor), "B")
    figure(f"{name}: replay mode total", sum(replay), "B")
    figure(f"{name}: cursor mode mean per turn", sum(cursor) / TURNS, "B")
    figure(f"{name}: replay mode mean per turn", sum(replay) / TURNS, "B")
    ratio(f"{name}: cursor / replay bytes", sum(cursor), sum(replay), budget=0.10)
    figure(f"{name}: fixed bytes every request resends (instr+tools)", fixed, "B")
    ratio(f"{name}: same, conversation bytes only (fixed removed)",
          sum(cursor) - requests * fixed, sum(replay) - requests * fixed)
    # Flat against growing: the least-squares slope of bytes per turn over turns 2-30,
    # apart for tool turns (two requests) and plain ones, so the mix does not tilt it.
    for kind, turns in (("tool turns", [t for t in range(2, TURNS + 1) if t % 3]),
                        ("plain turns", [t for t in range(2, TURNS + 1) if not t % 3])):
        for mode, sent in (("cursor", cursor), ("replay", replay)):
            slope = statistics.linear_regression(turns, [sent[t - 1] for t in turns]).slope
            figure(f"{name}: {mode} bytes per turn, growth per turn ({kind})", slope, "B")
    ratio(f"{name}: replay / cursor bytes, turn 2", replay[1], cursor[1])
    ratio(f"{name}: replay / cursor bytes, turn {TURNS - 1}", replay[TURNS - 2],
          cursor[TURNS - 2])
    for scale in (2, 4):
        scaled = sum(turn_bytes(adapter, model, True, scale)) / sum(
            turn_bytes(adapter, model, False, scale))
        print(f"{name + f': cursor / replay, answers x{scale} longer':<58} {scaled:>12.2f} x"
              "   (sensitivity)")


def main() -> None:
    print("(a) stream parsing")
    bench_parsing("openai-responses", openai_stream(DELTAS), OpenAIResponsesAdapter())
    bench_parsing("gemini-interactions", gemini_stream(DELTAS), GeminiInteractionsAdapter())
    print("(a') streaming through TurnEngine")
    bench_engine_streaming("openai-responses", openai_stream, OpenAIResponsesAdapter())
    bench_engine_streaming("gemini-interactions", gemini_stream, GeminiInteractionsAdapter())
    print("(b) request bytes, cursor vs replay")
    bench_bytes("openai-responses", OpenAIResponsesAdapter(),
                DEFAULT_REGISTRY.model("openai", "gpt-5"))
    bench_bytes("gemini-interactions", GeminiInteractionsAdapter(),
                DEFAULT_REGISTRY.model("gemini", "gemini-2.5-flash"))


if __name__ == "__main__":
    main()
