"""Replay building for the stateless codecs, and the DeepSeek emulator's cache hit ratio.

1. ``build_request`` for a local-loop call (history + user message + one tool round in
   the loop) over 1,000 and 10,000 persisted messages, for Chat Completions, DeepSeek
   (V4: reasoning on tool turns) and Anthropic. The history alternates user and
   assistant messages; every fourth assistant message is a tool turn (reasoning, a call
   with its own arguments, the result, the answer). Budget (DESIGN.md section 9): at most
   1 ms for 1,000 messages, 10 ms for 10,000, linear. "cold" clears the codec's
   memo (Anthropic's tool-input cache) before every run; "warm" is a later turn of the
   same chat, which re-renders the same history. Times are medians of the thread's CPU
   time (robust when the two cores are shared). Baseline in the same run: only
   ``compact_json(payload)`` of the finished payload (the serialisation the codecs
   skip by writing JSON text directly), and the bodies are checked to be byte-identical
   to it.
2. The DeepSeek emulator's prompt cache hit ratio over a 30-turn conversation with
   tools, driven over loopback by a small loop (codec + emulator + tool results +
   ``extend_loop``). Budget: at least 90% from turn 2, for a V4 (TOOL_TURNS) model.
3. A long Anthropic chat (``--turns``, default 200) on a small-context model through
   the engine, with and without provider compaction: the request bytes and the billed
   input tokens per turn (``benchmarks/_long_chat.py``). From the first compaction on,
   the bytes stay bounded; without compaction the chat overflows.

Run: ``python benchmarks/bench_replay.py [--turns N]``.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import statistics
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import aiohttp
import attrs

from benchmarks._long_chat import MODEL, USER_CHARS, long_chat, print_table
from benchmarks._util import figure, ratio
from turnstate.core._conversation import (
    Message,
    MessageStatus,
    Part,
    ReasoningPart,
    Role,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    ToolSpec,
)
from turnstate.core._decisions import Strategy
from turnstate.core._json import compact_json
from turnstate.core._registry import DEFAULT_REGISTRY, ModelInfo
from turnstate.emulators import DeepSeekEmulator
from turnstate.emulators._base import EmulatorServer
from turnstate.providers._protocol import ProviderCall, ProviderResponse
from turnstate.providers._sse import SseDecoder
from turnstate.providers.anthropic import AnthropicAdapter
from turnstate.providers.anthropic._blocks import tool_input_json
from turnstate.providers.chat_completions import ChatCompletionsAdapter
from turnstate.providers.deepseek import DeepSeekAdapter

NOW = datetime(2026, 1, 1, tzinfo=UTC)
TOOLS = (
    ToolSpec(name="weather", description="Current weather for a city.", parameters={
        "type": "object", "required": ["city"],
        "properties": {"city": {"type": "string", "description": "City name"},
                       "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}}),
    ToolSpec(name="search", description="Search the knowledge base.", parameters={
        "type": "object", "required": ["query"],
        "properties": {"query": {"type": "string"}, "limit": {"type": "integer"}}}),
    ToolSpec(name="calendar", description="Look up calendar events.", parameters={
        "type": "object", "properties": {"day": {"type": "string"}}}),
)
CODECS: tuple[tuple[str, Any, str, str], ...] = (
    ("chat-completions", ChatCompletionsAdapter(), "openai-compatible", "gpt-4o"),
    ("deepseek", DeepSeekAdapter(), "deepseek", "deepseek-v4-flash"),
    ("anthropic", AnthropicAdapter(), "anthropic", "claude-sonnet-4-5"),
)


def message(seq: int, role: Role, parts: tuple[Part, ...]) -> Message:
    return Message(id=f"m{seq}", chat_id="bench", seq=seq, role=role,
                   status=MessageStatus.COMPLETED, parts=parts, created_at=NOW, updated_at=NOW)


def history(count: int, provider: str, model: str) -> tuple[Message, ...]:
    kind = "thinking" if provider == "anthropic" else "reasoning_content"
    out = []
    for turn in range(count // 2):
        out.append(message(2 * turn + 1, Role.USER, (TextPart(
            text=f"Question {turn}: what is the weather like in the city today, roughly?"),)))
        if turn % 4 == 0:
            call_id = f"call_{turn:06d}"
            parts: tuple[Part, ...] = (
                ReasoningPart(provider=provider, model=model, kind=kind,
                              text=f"The user asks about weather {turn}; call the tool.",
                              signature=f"sig{turn}"),
                ToolCallPart(call_id=call_id, name="weather", provider=provider, model=model,
                             arguments=json.dumps({"city": f"City {turn}", "unit": "celsius"})),
                ToolResultPart(call_id=call_id, name="weather",
                               output=f'{{"temp": {turn % 30}, "sky": "clear", "wind": 3}}'),
                TextPart(text=f"It is {turn % 30} degrees and clear in City {turn}."))
        else:
            parts = (TextPart(text="Here is a plain answer of ordinary length, the kind most "
                                   f"turns of a chat produce, with a number {turn}."),)
        out.append(message(2 * turn + 2, Role.ASSISTANT, parts))
    return tuple(out)


def loop_call(adapter: Any, provider: str, model: ModelInfo, count: int) -> ProviderCall:
    """A local-loop call over ``count`` persisted messages with one tool round looped."""
    call = ProviderCall(strategy=Strategy.LOCAL_LOOP, model=model, system_prompt="Be brief.",
                        tools=TOOLS, history=history(count, provider, model.name),
                        user_text="And tomorrow?")
    response = ProviderResponse(response_id="r", parts=(ToolCallPart(
        call_id="call_loop", name="weather", arguments='{"city":"Oslo"}', provider=provider,
        model=model.name),))
    results = [ToolResultPart(call_id="call_loop", name="weather", output="cold")]
    return attrs.evolve(call, loop_messages=adapter.extend_loop(call, response, results),
                        iteration=1)


def median_ms(fn: Callable[[], object], repeat: int, before: Callable[[], None]) -> float:
    """Median CPU time of ``fn()`` on this thread (user + system, page faults included).

    Replay building is CPU-bound; the thread's CPU clock is not inflated when other
    processes share the two cores, which wall-clock time on a busy machine is.
    """
    samples = []
    for _ in range(repeat):
        before()
        start = time.thread_time_ns()
        fn()
        samples.append(time.thread_time_ns() - start)
    return statistics.median(samples) / 1e6


def serialise(payload: dict[str, Any]) -> bytes:
    return compact_json(payload).encode("utf-8")


def bench_codec(name: str, adapter: Any, provider: str, model_name: str) -> None:
    model = DEFAULT_REGISTRY.model(provider, model_name)
    cold: dict[int, float] = {}
    for count, repeat in ((1000, 61), (10_000, 21)):
        call = loop_call(adapter, provider, model, count)
        body = adapter.build_request(call).body
        payload = json.loads(body)
        assert compact_json(payload).encode("utf-8") == body, "body differs from compact_json"
        build = functools.partial(adapter.build_request, call)
        cold[count] = median_ms(build, repeat, tool_input_json.cache_clear)
        warm = median_ms(build, repeat, lambda: None)
        baseline = median_ms(functools.partial(serialise, payload), repeat, lambda: None)
        budget = 1.0 if count == 1000 else 10.0
        figure(f"{name} {count:>6} msgs build_request cold (median)", cold[count], "ms",
               budget=budget)
        figure(f"{name} {count:>6} msgs build_request warm (median)", warm, "ms")
        figure(f"{name} {count:>6} msgs per message (cold)", cold[count] * 1000 / count, "us")
        figure(f"{name} {count:>6} msgs body size", len(body) / 1024, "KiB")
        ratio(f"{name} {count:>6} msgs cold / compact_json(payload) alone", cold[count],
              baseline)
    ratio(f"{name} 10k/1k (linear = 10)", cold[10_000], cold[1000])
    print()


# --- part 2: the DeepSeek cache over 30 turns ------------------------------------------

SYSTEM = ("You are the assistant of a travel desk. Answer in short, precise sentences. "
          "Use the tools for weather, search and calendar questions; never guess figures. "
          * 12)


def turn_text(turn: int) -> str:
    topic = ("weather in Oslo", "museums in Rome", "my meetings", "trains to Lyon")[turn % 4]
    think = " [[think]]" if turn % 3 == 0 else ""
    tool = ("", " [[call:weather]]", " [[call:search]]", " [[call:calendar]]")[turn % 4]
    return f"Turn {turn}: please tell me about {topic}, with details.{think}{tool}"


def tool_output(call: ToolCallPart, turn: int) -> str:
    rows = [{"item": f"{call.name} result {turn}.{i}", "score": i} for i in range(6)]
    return json.dumps({"results": rows})


async def run_turn(session: aiohttp.ClientSession, adapter: DeepSeekAdapter, call: ProviderCall,
                   turn: int) -> tuple[list[ProviderResponse], list[Part]]:
    responses: list[ProviderResponse] = []
    parts: list[Part] = []
    while True:
        request = adapter.build_request(call)
        async with session.post(request.url, data=request.body,
                                headers=dict(request.headers)) as reply:
            raw = await reply.read()
        if reply.status != 200:
            msg = f"turn {turn}: HTTP {reply.status}: {raw[:300]!r}"
            raise RuntimeError(msg)
        parser = adapter.stream_parser()
        for event in SseDecoder().feed(raw):
            parser.feed(event)
        response = parser.finish()
        responses.append(response)
        parts += response.parts
        if not response.tool_calls:
            return responses, parts
        results = [ToolResultPart(call_id=c.call_id, name=c.name, output=tool_output(c, turn))
                   for c in response.tool_calls]
        parts += results
        call = attrs.evolve(call, loop_messages=adapter.extend_loop(call, response, results),
                            iteration=call.iteration + 1)


async def cache_ratio(model_name: str, *, turns: int = 30, verbose: bool) -> float:
    emulator = DeepSeekEmulator()
    model = DEFAULT_REGISTRY.model("deepseek", model_name)
    hit_total = prompt_total = 0
    async with EmulatorServer(emulator) as server, aiohttp.ClientSession() as session:
        adapter = DeepSeekAdapter(base_url=server.base_url + DeepSeekEmulator.API_PREFIX,
                                  api_key="bench")
        stored: list[Message] = []
        for turn in range(1, turns + 1):
            # The caller lists its tools in a different order every turn.
            tools = TOOLS[turn % 3:] + TOOLS[:turn % 3]
            call = ProviderCall(strategy=Strategy.LOCAL_LOOP, model=model, system_prompt=SYSTEM,
                                tools=tools, history=tuple(stored), user_text=turn_text(turn))
            responses, parts = await run_turn(session, adapter, call, turn)
            stored += [message(len(stored) + 1, Role.USER, (TextPart(text=call.user_text),)),
                       message(len(stored) + 2, Role.ASSISTANT, tuple(parts))]
            hit = sum(r.usage.cache_hit_tokens or 0 for r in responses)
            prompt = sum(r.usage.input_tokens for r in responses)
            if turn >= 2:
                hit_total += hit
                prompt_total += prompt
            if verbose:
                print(f"  turn {turn:>2}: {len(responses)} request(s), prompt {prompt:>6} tokens, "
                      f"hit ratio {hit / prompt:6.1%}")
    return hit_total / prompt_total


async def bench_cache() -> None:
    print("DeepSeek emulator prompt cache, 30 turns with tools, deepseek-v4-flash (TOOL_TURNS):")
    overall = await cache_ratio("deepseek-v4-flash", verbose=True)
    figure("deepseek-v4-flash hit ratio from turn 2", overall * 100, "%")
    print(f"{'':<58} budget >= 90 %: {'ok' if overall >= 0.9 else 'UNDER'}")
    for name in ("deepseek-reasoner", "deepseek-chat"):
        figure(f"{name} hit ratio from turn 2 (comparison)",
               await cache_ratio(name, verbose=False) * 100, "%")


async def bench_long_chat(turns: int) -> None:
    print(f"\nA long Anthropic chat, {turns} turns of ~{USER_CHARS:,} characters, "
          f"{MODEL.name} ({MODEL.context_limit:,}-token window), compaction on vs off:")
    on = await long_chat(turns, compaction=True)
    off = await long_chat(turns, compaction=False)
    print_table(on, off, every=max(1, turns // 20))
    done = [row for row in on if row is not None]
    first = next((n for n, row in enumerate(done) if row.compacted), None)
    if first is not None:
        figure("bytes of the request that first compacted", done[first].request_bytes, "B")
        figure("largest request after it", max(r.request_bytes for r in done[first:]), "B")
    figure("compacting turns", sum(r.compacted for r in done), "")
    figure("billed input tokens, all turns (compaction on)", sum(r.billed_input for r in done), "")
    survived = [row for row in off if row is not None]
    figure("turns completed without compaction", len(survived), "")
    figure("billed input tokens over those turns (off)",
           sum(r.billed_input for r in survived), "")
    figure("billed input tokens over the same turns (on)",
           sum(r.billed_input for r in done[:len(survived)]), "")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--turns", type=int, default=200, help="turns of the long chat")
    args = parser.parse_args()
    print("Replay building (build_request over the persisted history):")
    for name, adapter, provider, model in CODECS:
        bench_codec(name, adapter, provider, model)
    asyncio.run(bench_cache())
    asyncio.run(bench_long_chat(args.turns))


if __name__ == "__main__":
    main()
