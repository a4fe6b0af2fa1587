"""The DeepSeek emulator over loopback: thinking, reasoning_content rules, the prefix cache."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from turnstate.emulators import DeepSeekEmulator, PrefixCache, RuleSet, rule_set
from turnstate.emulators._base import EmulatorServer, Fault
from turnstate.providers._sse import SseDecoder
from turnstate.providers.deepseek import DeepSeekAdapter, parse_response_body

V4_ERROR = {"error": {
    "message": "The `reasoning_content` in the thinking mode must be passed back to the API.",
    "type": "invalid_request_error", "param": None, "code": "invalid_request_error"}}
TOOLS = [{"type": "function", "function": {"name": "weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}}}}]


@pytest.fixture
async def rig() -> AsyncIterator[tuple[DeepSeekEmulator, str, aiohttp.ClientSession]]:
    emulator = DeepSeekEmulator()
    async with EmulatorServer(emulator) as server, aiohttp.ClientSession() as session:
        yield emulator, server.base_url + DeepSeekEmulator.API_PREFIX, session


Rig = tuple[DeepSeekEmulator, str, aiohttp.ClientSession]


async def post(rig: Rig, body: dict[str, Any], path: str = "/chat/completions") -> tuple[
        int, Any]:
    """POST a body; a stream comes back as its decoded chunks (``[DONE]`` dropped)."""
    _, base, session = rig
    async with session.post(base + path, json=body) as response:
        raw = await response.read()
    if response.status != 200 or not body.get("stream"):
        return response.status, json.loads(raw)
    events = SseDecoder().feed(raw)
    assert events[-1].data == "[DONE]"
    return response.status, [json.loads(e.data) for e in events[:-1]]


def request(model: str, *messages: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"model": model, "messages": [{"role": "system", "content": "sys"}, *messages],
            "tools": TOOLS, "stream": True, "stream_options": {"include_usage": True}, **extra}


USER = {"role": "user", "content": "weather? [[think]] [[call:weather]]"}


def assistant(call_id: str, **extra: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": None, "tool_calls": [
        {"id": call_id, "type": "function",
         "function": {"name": "weather", "arguments": '{"city":"city-value"}'}}], **extra}


def tool(call_id: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": "cold"}


def reply_of(chunks: Any) -> tuple[str, str, list[dict[str, Any]], dict[str, Any]]:
    """(reasoning, text, tool call fragments, usage) of a decoded stream."""
    reasoning = text = ""
    calls: list[dict[str, Any]] = []
    usage: dict[str, Any] = {}
    for chunk in chunks:
        for choice in chunk["choices"]:
            delta = choice["delta"]
            reasoning += delta.get("reasoning_content") or ""
            text += delta.get("content") or ""
            calls += delta.get("tool_calls") or []
        usage = chunk["usage"] or usage
    return reasoning, text, calls, usage


V32_THINKING = {"thinking": {"type": "enabled"}}
"""A deployment still on V3.2 (``deepseek-v3.2``) thinks when asked to."""


@pytest.mark.parametrize(("body", "expected"), [
    ({"model": "deepseek-reasoner"}, RuleSet.V4),
    ({"model": "deepseek-reasoner-2026-01-01"}, RuleSet.V4),
    ({"model": "deepseek-chat"}, RuleSet.NONE),
    ({"model": "deepseek-chat", "thinking": {"type": "enabled"}}, RuleSet.V4),
    ({"model": "deepseek-v4-flash"}, RuleSet.V4),
    ({"model": "deepseek-v4-flash-0701"}, RuleSet.V4),
    ({"model": "deepseek-v4-pro", "thinking": {"type": "enabled"}}, RuleSet.V4),
    ({"model": "deepseek-v4-flash", "thinking": {"type": "disabled"}}, RuleSet.NONE),
    ({"model": "deepseek-v3.2", **V32_THINKING}, RuleSet.V32),
    ({"model": "deepseek-v3.2"}, RuleSet.NONE),
    ({"model": "deepseek-v3.2-reasoner"}, RuleSet.V32),
])
def test_rule_set_is_chosen_by_model(body: dict[str, Any], expected: RuleSet) -> None:
    """V4 rules for deepseek-v4-* and the old names (aliases of deepseek-v4-flash, thinking
    on for the reasoner), V3.2 rules for a V3.2 deployment in thinking mode."""
    assert rule_set(body) is expected


async def test_reasoning_needs_think_directive_and_thinking_mode(rig: Rig) -> None:
    """Reasoning streams before the reply only in thinking mode and with ``[[think]]``."""
    say = {"role": "user", "content": "hi [[think]]"}
    _, chunks = await post(rig, request("deepseek-reasoner", say))
    assert reply_of(chunks)[0] == "Thinking about 'hi' (round 0)."
    assert {c["model"] for c in chunks} == {"deepseek-v4-flash"}  # the alias's model
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": None,
                                                "reasoning_content": ""}
    _, chunks = await post(rig, request("deepseek-chat", say))
    assert reply_of(chunks)[0] == "" and "reasoning_content" not in json.dumps(chunks)
    _, chunks = await post(rig, request("deepseek-reasoner", {"role": "user", "content": "hi"}))
    assert reply_of(chunks)[0] == ""


async def test_v32_missing_reasoning_after_the_last_user_message(rig: Rig) -> None:
    """V3.2 rejects a loop assistant message without the key, naming its index."""
    status, body = await post(rig, request("deepseek-v3.2", USER, assistant("call_x"),
                                           tool("call_x"), **V32_THINKING))
    assert status == 400
    assert body == {"error": {
        "message": "Missing `reasoning_content` field in the assistant message at message "
                   "index 2", "type": "invalid_request_error", "param": None,
        "code": "invalid_request_error"}}


async def test_v32_allows_history_without_reasoning(rig: Rig) -> None:
    """Before the last user message V3.2 accepts assistant messages without the key."""
    status, _ = await post(rig, request("deepseek-v3.2", USER, assistant("call_x"),
                                        tool("call_x"), {"role": "assistant", "content": "ok"},
                                        {"role": "user", "content": "thanks"}, **V32_THINKING))
    assert status == 200
    status, _ = await post(rig, request("deepseek-v3.2", USER,
                                        assistant("call_y", reasoning_content=""),
                                        tool("call_y"), **V32_THINKING))
    assert status == 200


async def test_v4_rules_apply_to_deepseek_chat_in_thinking_mode(rig: Rig) -> None:
    """deepseek-chat (V4 flash, thinking off) needs the key only when thinking is enabled."""
    messages = (USER, assistant("call_x"), tool("call_x"))
    assert (await post(rig, request("deepseek-chat", *messages)))[0] == 200
    status, body = await post(rig, request("deepseek-chat", *messages,
                                           thinking={"type": "enabled"}))
    assert (status, body) == (400, V4_ERROR)


async def test_v4_requires_reasoning_on_every_tool_call_message(rig: Rig) -> None:
    """V4 rejects a tool-call assistant message without the key, even before the last user."""
    history = (USER, assistant("call_x"), tool("call_x"), {"role": "assistant", "content": "ok"},
               {"role": "user", "content": "thanks"})
    status, body = await post(rig, request("deepseek-v4-flash", *history))
    assert (status, body) == (400, V4_ERROR)
    status, _ = await post(rig, request("deepseek-v4-flash", *history,
                                        thinking={"type": "disabled"}))
    assert status == 200


async def test_v4_requires_the_issued_reasoning_back(rig: Rig) -> None:
    """A V4 call issued with reasoning must come back with that reasoning, not ""."""
    status, chunks = await post(rig, request("deepseek-v4-flash", USER))
    reasoning, _, calls, _ = reply_of(chunks)
    call_id = calls[0]["id"]
    assert status == 200 and reasoning and call_id == "call_00_000001"
    status, body = await post(rig, request("deepseek-v4-flash", USER,
                                           assistant(call_id, reasoning_content=""),
                                           tool(call_id)))
    assert (status, body) == (400, V4_ERROR)
    status, _ = await post(rig, request("deepseek-v4-flash", USER,
                                        assistant(call_id, reasoning_content=reasoning),
                                        tool(call_id)))
    assert status == 200


async def test_issued_reasoning_is_required_whatever_the_model_name(rig: Rig) -> None:
    """Issue 24, item 1: a call issued to deepseek-reasoner, answered as
    deepseek-v4-flash, must come back with its reasoning in the next request (whatever
    model that request names); "" is the 400 DeepSeek returns."""
    status, chunks = await post(rig, request("deepseek-reasoner", USER))
    reasoning, _, calls, _ = reply_of(chunks)
    assert status == 200 and reasoning and chunks[0]["model"] == "deepseek-v4-flash"
    for model in ("deepseek-reasoner", "deepseek-v4-flash"):
        status, body = await post(rig, request(model, USER, assistant(
            calls[0]["id"], reasoning_content=""), tool(calls[0]["id"])))
        assert (status, body) == (400, V4_ERROR)
    status, _ = await post(rig, request("deepseek-reasoner", USER, assistant(
        calls[0]["id"], reasoning_content=reasoning), tool(calls[0]["id"])))
    assert status == 200


async def test_pairing_errors_use_deepseek_shape(rig: Rig) -> None:
    """Tool-pairing 400s carry DeepSeek's null param and code = type."""
    status, body = await post(rig, request("deepseek-chat", USER, assistant("call_x")))
    assert status == 400
    error = body["error"]
    assert error["message"].startswith("An assistant message with 'tool_calls' must be followed")
    assert (error["param"], error["code"]) == (None, "invalid_request_error")


async def test_usage_rides_on_the_finish_chunk(rig: Rig) -> None:
    """Usage (with hit and miss tokens) is on the finish_reason chunk; no choices:[] chunk."""
    _, chunks = await post(rig, request("deepseek-chat", {"role": "user", "content": "hi"}))
    last = chunks[-1]
    assert last["choices"][0]["finish_reason"] == "stop"
    usage = last["usage"]
    assert usage["prompt_cache_hit_tokens"] + usage["prompt_cache_miss_tokens"] == \
        usage["prompt_tokens"]
    assert all(c["choices"] for c in chunks)
    assert all(c["usage"] is None for c in chunks[:-1])


async def test_prefix_cache_hits_the_longest_persisted_unit(rig: Rig) -> None:
    """A request that extends an earlier one hits its prefix; changing an early byte misses."""
    emulator = rig[0]
    first = request("deepseek-chat", {"role": "user", "content": "hello [[say:Hi_there]]"})
    _, chunks = await post(rig, first)
    _, text, _, usage = reply_of(chunks)
    assert usage["prompt_cache_hit_tokens"] == 0
    follow = request("deepseek-chat", {"role": "user", "content": "hello [[say:Hi_there]]"},
                     {"role": "assistant", "content": text}, {"role": "user", "content": "bye"})
    _, chunks = await post(rig, follow)
    usage = reply_of(chunks)[3]
    assert usage["prompt_cache_miss_tokens"] == usage["prompt_tokens"] - \
        usage["prompt_cache_hit_tokens"]
    # The output unit (input + the reply as sent back) covers all but the new user message.
    new_user = len(json.dumps({"content": "bye", "role": "user"}, separators=(",", ":")))
    assert usage["prompt_cache_miss_tokens"] <= new_user // 4 + 1
    changed = dict(follow, messages=[{"role": "system", "content": "SYS"},
                                     *follow["messages"][1:]])
    usage = reply_of((await post(rig, changed))[1])[3]
    assert usage["prompt_cache_hit_tokens"] == 0
    emulator.cache.clear()
    assert len(emulator.cache) == 0
    usage = reply_of((await post(rig, follow))[1])[3]
    assert usage["prompt_cache_hit_tokens"] == 0


def test_prefix_cache_units_and_eviction() -> None:
    """Only whole persisted units hit; the oldest units are evicted beyond capacity."""
    cache = PrefixCache(capacity=2)
    cache.persist(["a", "bb"])
    assert cache.match(["a", "bb", "ccc"]) == 3
    assert cache.match(["a", "bX"]) == 0
    assert cache.match(["a"]) == 0  # "a" alone was never a unit
    cache.persist(["a"])
    cache.persist(["z"])
    assert len(cache) == 2 and cache.match(["a", "bb"]) == 1  # ["a", "bb"] was evicted


async def test_v1_path_is_served_too(rig: Rig) -> None:
    """DeepSeek also answers under /v1/chat/completions."""
    status, _ = await post(rig, request("deepseek-chat", {"role": "user", "content": "hi"}),
                           path="/v1/chat/completions")
    assert status == 200


async def test_non_streaming_body_has_reasoning_and_cache_usage(rig: Rig) -> None:
    """Without ``stream`` the body carries reasoning_content and the cache counts."""
    body = request("deepseek-reasoner", {"role": "user", "content": "hi [[think]]"})
    del body["stream"], body["stream_options"]
    status, data = await post(rig, body)
    assert status == 200
    message = data["choices"][0]["message"]
    assert message["reasoning_content"].startswith("Thinking about")
    parsed = parse_response_body(data)
    assert parsed.usage.cache_miss_tokens == data["usage"]["prompt_tokens"]


async def test_faults_and_request_log(rig: Rig) -> None:
    """Faults apply to DeepSeek too, and every request is logged."""
    emulator = rig[0]
    emulator.faults.push(Fault(status=503, body={"error": {"message": "Server overloaded",
                                                           "type": "server_error"}}))
    status, body = await post(rig, request("deepseek-chat", {"role": "user", "content": "a"}))
    assert status == 503
    error = DeepSeekAdapter().classify_error(status, {}, json.dumps(body).encode())
    assert error.retryable
    assert [r.path for r in emulator.requests] == ["/chat/completions"]
