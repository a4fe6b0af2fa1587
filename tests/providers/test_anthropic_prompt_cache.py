"""The Anthropic emulator caches like Anthropic: breakpoints, the minimum length, four at
most, a lookback window and lifetimes; and a planted reordering of tools is caught."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from tests.providers.support import message
from turnstate.core._conversation import Role, TextPart, ToolSpec
from turnstate.core._decisions import Strategy
from turnstate.core._registry import DEFAULT_REGISTRY
from turnstate.emulators import AnthropicEmulator
from turnstate.emulators._base import EmulatorServer
from turnstate.providers._protocol import ProviderCall
from turnstate.providers.anthropic import AnthropicAdapter

SYSTEM = "You follow the house rules carefully. " * 200  # ~7,600 characters
EPHEMERAL = {"type": "ephemeral"}
TOOLS = [{"name": name, "description": f"The {name} tool. " * 20,
          "input_schema": {"type": "object"}} for name in ("alpha", "beta", "gamma")]

Rig = tuple[AnthropicEmulator, str, aiohttp.ClientSession]


@pytest.fixture
async def rig() -> AsyncIterator[Rig]:
    emulator = AnthropicEmulator()
    async with EmulatorServer(emulator) as server, aiohttp.ClientSession() as session:
        yield emulator, server.base_url + "/v1/messages", session


def body(*, system: Any = None, tools: Any = None, messages: Any = None,
         model: str = "claude-sonnet-4-5") -> dict[str, Any]:
    out: dict[str, Any] = {"model": model, "max_tokens": 100,
                           "messages": messages or [{"role": "user", "content": "hi"}]}
    out["system"] = system if system is not None else [
        {"type": "text", "text": SYSTEM, "cache_control": EPHEMERAL}]
    if tools is not None:
        out["tools"] = tools
    return out


async def usage(rig: Rig, payload: dict[str, Any]) -> dict[str, Any]:
    _, url, session = rig
    async with session.post(url, json=payload, headers={"x-api-key": "k"}) as response:
        answer = await response.json()
        assert response.status == 200, answer
    found: dict[str, Any] = answer["usage"]
    return found


async def test_a_breakpoint_writes_then_reads_and_input_is_the_rest(rig: Rig) -> None:
    first = await usage(rig, body())
    assert first["cache_creation_input_tokens"] > 1024 and first["cache_read_input_tokens"] == 0
    second = await usage(rig, body(messages=[{"role": "user", "content": "another"}]))
    assert second["cache_read_input_tokens"] == first["cache_creation_input_tokens"]
    assert second["cache_creation_input_tokens"] == 0
    assert 0 < second["input_tokens"] < 40


async def test_a_prefix_change_invalidates(rig: Rig) -> None:
    await usage(rig, body())
    changed = [{"type": "text", "text": SYSTEM + " One more rule.", "cache_control": EPHEMERAL}]
    after = await usage(rig, body(system=changed))
    assert after["cache_read_input_tokens"] == 0 and after["cache_creation_input_tokens"] > 0


async def test_reordered_tools_invalidate_and_turnstate_never_reorders(rig: Rig) -> None:
    """A planted reordering of the tools misses the cache; the codec's bodies, whatever
    order the caller lists the tools in, read it."""
    await usage(rig, body(tools=TOOLS))
    planted = await usage(rig, body(tools=[TOOLS[1], TOOLS[0], TOOLS[2]]))
    assert planted["cache_read_input_tokens"] == 0
    specs = [ToolSpec(name=t["name"], description=t["description"],
                      parameters=t["input_schema"]) for t in TOOLS]
    model = DEFAULT_REGISTRY.model("anthropic", "claude-sonnet-4-5")
    history = (message(1, Role.USER, TextPart(text="hi")),
               message(2, Role.ASSISTANT, TextPart(text="hello")))
    reads = []
    for order in (specs, specs[::-1], [specs[2], specs[0], specs[1]]):
        call = ProviderCall(strategy=Strategy.LOCAL_LOOP, model=model, system_prompt=SYSTEM,
                            tools=order, history=history, user_text="next")
        sent = json.loads(AnthropicAdapter().build_request(call).body)
        sent.pop("stream")
        reads.append((await usage(rig, sent))["cache_read_input_tokens"])
    # The first reads the tools+system entry the unplanted request wrote; the others also
    # the history entry the first wrote: the same prefix whatever the caller's order.
    assert 0 < reads[0] < reads[1] == reads[2]


async def test_a_breakpoint_below_the_minimum_writes_nothing(rig: Rig) -> None:
    short = [{"type": "text", "text": "Be brief.", "cache_control": EPHEMERAL}]
    for _ in range(2):
        figures = await usage(rig, body(system=short))
        assert figures["cache_creation_input_tokens"] == 0
        assert figures["cache_read_input_tokens"] == 0
    # ~1,900 tokens: enough for Sonnet (1,024), not for Haiku 4.5 (4,096).
    haiku = await usage(rig, body(model="claude-haiku-4-5"))
    assert haiku["cache_creation_input_tokens"] == 0


async def test_more_than_four_breakpoints_is_anthropics_400(rig: Rig) -> None:
    _, url, session = rig
    marked = [{"type": "text", "text": f"part {n}", "cache_control": EPHEMERAL}
              for n in range(5)]
    async with session.post(url, json=body(system=marked)) as response:
        answer = await response.json()
    assert response.status == 400
    assert answer["error"] == {"type": "invalid_request_error", "message":
                               "A maximum of 4 blocks with cache_control may be provided. "
                               "Found 5."}


async def test_entries_expire_after_their_lifetime_and_a_read_refreshes(rig: Rig) -> None:
    emulator = rig[0]
    await usage(rig, body())
    emulator.cache.advance(240)
    assert (await usage(rig, body()))["cache_read_input_tokens"] > 0  # refreshed
    emulator.cache.advance(240)
    assert (await usage(rig, body()))["cache_read_input_tokens"] > 0
    emulator.cache.advance(301)
    assert (await usage(rig, body()))["cache_read_input_tokens"] == 0
    hour = [{"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral",
                                                                 "ttl": "1h"}}]
    await usage(rig, body(system=hour))
    emulator.cache.advance(1800)
    assert (await usage(rig, body(system=hour)))["cache_read_input_tokens"] > 0


def turns(count: int) -> list[dict[str, Any]]:
    out = []
    for n in range(count):
        out += [{"role": "user", "content": [{"type": "text", "text": f"q{n}"}]},
                {"role": "assistant", "content": [{"type": "text", "text": f"a{n}"}]}]
    return out


def marked_at_end(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    last = dict(messages[-1])
    last["content"] = [*last["content"][:-1], {**last["content"][-1],
                                                "cache_control": EPHEMERAL}]
    return [*messages[:-1], last, {"role": "user", "content": "now"}]


async def test_the_lookback_finds_an_entry_up_to_twenty_blocks_back(rig: Rig) -> None:
    system = [{"type": "text", "text": SYSTEM}]
    await usage(rig, body(system=system, messages=marked_at_end(turns(2))))
    near = await usage(rig, body(system=system, messages=marked_at_end(turns(10))))
    assert near["cache_read_input_tokens"] > 1024  # 16 blocks on: found
    rig[0].cache.clear()
    await usage(rig, body(system=system, messages=marked_at_end(turns(2))))
    beyond = await usage(rig, body(system=system, messages=marked_at_end(turns(14))))
    assert beyond["cache_read_input_tokens"] == 0  # 24 blocks on: written again
    assert beyond["cache_creation_input_tokens"] > 1024
