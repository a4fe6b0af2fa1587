"""Anthropic ``cache_control`` breakpoints: where they go, how many, and when none."""

from __future__ import annotations

import json
from typing import Any

import attrs
import pytest

from tests.providers.support import message as msg
from tests.providers.support import request_json
from turnstate.core import CachePolicy
from turnstate.core._conversation import (
    Message,
    Role,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    ToolSpec,
)
from turnstate.core._decisions import Strategy
from turnstate.core._registry import DEFAULT_REGISTRY
from turnstate.providers._protocol import ProviderCall, ProviderResponse
from turnstate.providers.anthropic import AnthropicAdapter
from turnstate.providers.anthropic._blocks import tool_input_json

SONNET = DEFAULT_REGISTRY.model("anthropic", "claude-sonnet-4-5")
HAIKU = DEFAULT_REGISTRY.model("anthropic", "claude-haiku-4-5")
BIG_SYSTEM = "Follow the house rules. " * 400  # ~9,600 characters, ~2,400 tokens
TOOLS = (ToolSpec(name="weather", parameters={"type": "object"}), ToolSpec(name="clock"))


def history(turns: int) -> tuple[Message, ...]:
    out: list[Message] = []
    for turn in range(turns):
        out.append(msg(2 * turn + 1, Role.USER, TextPart(text=f"question {turn}")))
        out.append(msg(2 * turn + 2, Role.ASSISTANT, TextPart(text=f"answer {turn}")))
    return tuple(out)


def call(**changes: Any) -> ProviderCall:
    fields: dict[str, Any] = {"strategy": Strategy.LOCAL_LOOP, "model": SONNET,
                              "system_prompt": BIG_SYSTEM, "tools": TOOLS,
                              "history": history(3), "user_text": "next"}
    return ProviderCall(**{**fields, **changes})


def marks(body: dict[str, Any]) -> list[str]:
    """Where the body's breakpoints are: ``system``, ``tool:NAME``, ``m{i}:{type}``."""
    found = []
    for tool in body.get("tools", []):
        if "cache_control" in tool:
            found.append(f"tool:{tool['name']}")
    system = body.get("system")
    if isinstance(system, list) and any("cache_control" in b for b in system):
        found.append("system")
    for index, message in enumerate(body["messages"]):
        for block in message["content"]:
            if "cache_control" in block:
                found.append(f"m{index}:{block['type']}")
    return found


def loop_after(first: ProviderCall, iterations: int) -> ProviderCall:
    adapter, current = AnthropicAdapter(), first
    for n in range(iterations):
        calls = (ToolCallPart(call_id=f"toolu_{n}", name="clock", arguments="{}"),)
        response = ProviderResponse(response_id=None, parts=calls)
        results = [ToolResultPart(call_id=f"toolu_{n}", name="clock", output="12:00")]
        loop = adapter.extend_loop(current, response, results)
        current = attrs.evolve(current, loop_messages=loop, iteration=n + 1)
    return current


def test_a_turn_marks_system_the_previous_question_and_the_new_one() -> None:
    """The new question is written at once (the loop and the next turn read it); the
    previous question is where the previous turn's first request wrote (its read point)."""
    body = request_json(AnthropicAdapter(), call())
    assert marks(body) == ["system", "m4:text", "m6:text"]
    assert body["messages"][4]["content"][0]["text"] == "question 2"
    assert body["messages"][6]["content"][-1]["text"] == "next"
    assert body["system"][0]["cache_control"] == {"type": "ephemeral"}
    assert "cache_control" not in body["messages"][5]["content"][-1]  # the last answer


def test_a_local_loop_marks_the_newest_and_the_previous_tool_result_never_more_than_four(
) -> None:
    one = request_json(AnthropicAdapter(), loop_after(call(), 1))
    assert marks(one) == ["system", "m4:text", "m6:text", "m8:tool_result"]
    three = request_json(AnthropicAdapter(), loop_after(call(), 3))
    assert marks(three) == ["system", "m6:text", "m10:tool_result", "m12:tool_result"]


def test_the_read_point_is_the_previous_question_however_long_its_tool_loop() -> None:
    """Anthropic looks back only ~20 blocks from a breakpoint: after a turn of 12 tool
    rounds the previous question is 49 blocks before the new one, and its own mark is
    what lets the new turn read the chat from the cache (money3)."""
    calls = [ToolCallPart(call_id=f"toolu_{n}", name="clock", arguments="{}")
             for n in range(24)]
    results = [ToolResultPart(call_id=f"toolu_{n}", name="clock", output="12:00")
               for n in range(24)]
    rounds = [part for n in range(0, 24, 2)
              for part in (*calls[n:n + 2], *results[n:n + 2])]
    loop_turn = (msg(7, Role.USER, TextPart(text="check the clocks")),
                 msg(8, Role.ASSISTANT, *rounds, TextPart(text="all 12:00")))
    body = request_json(AnthropicAdapter(), call(history=history(3) + loop_turn))
    assert marks(body) == ["system", "m6:text", "m32:text"]
    assert body["messages"][6]["content"][0]["text"] == "check the clocks"


def test_the_first_request_of_a_chat_writes_nothing() -> None:
    body = request_json(AnthropicAdapter(), call(history=()))
    assert marks(body) == [] and isinstance(body["system"], str)
    assert marks(request_json(AnthropicAdapter(), loop_after(call(history=()), 1))) == [
        "system", "m0:text", "m2:tool_result"]


def test_no_breakpoint_below_the_models_minimum() -> None:
    small = call(system_prompt="Be brief.")
    assert marks(request_json(AnthropicAdapter(), small)) == []
    # ~2,400 tokens: cacheable on Sonnet (1,024), not on Haiku 4.5 (4,096).
    assert marks(request_json(AnthropicAdapter(), call(model=HAIKU))) == []
    long_history = call(model=HAIKU, history=history(3) + tuple(
        msg(10 + i, Role.USER if i % 2 == 0 else Role.ASSISTANT, TextPart(text="x" * 4000))
        for i in range(4)))
    assert marks(request_json(AnthropicAdapter(), long_history)) == ["m8:text", "m10:text"]


def test_without_a_system_prompt_the_last_tool_carries_the_first_breakpoint() -> None:
    body = request_json(AnthropicAdapter(), call(system_prompt="", tools=(
        ToolSpec(name="zeta", description=BIG_SYSTEM), ToolSpec(name="alpha"))))
    assert marks(body) == ["tool:zeta", "m4:text", "m6:text"]
    assert "system" not in body


def test_off_sends_no_breakpoint_and_one_hour_says_its_ttl() -> None:
    off = request_json(AnthropicAdapter(), loop_after(call(cache=CachePolicy.OFF), 2))
    assert marks(off) == [] and isinstance(off["system"], str)
    hour = request_json(AnthropicAdapter(), call(cache=CachePolicy.TTL_1H))
    assert hour["system"][0]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}


def test_a_breakpoint_changes_nothing_but_the_marked_blocks() -> None:
    marked = request_json(AnthropicAdapter(), loop_after(call(), 2))
    plain = request_json(AnthropicAdapter(), loop_after(call(cache=CachePolicy.OFF), 2))
    for message in marked["messages"]:
        for block in message["content"]:
            block.pop("cache_control", None)
    marked["system"] = marked["system"][0]["text"]
    assert marked == plain


def test_tools_go_in_one_order_whatever_the_callers() -> None:
    forward = AnthropicAdapter().build_request(call()).body
    backward = AnthropicAdapter().build_request(call(tools=TOOLS[::-1])).body
    assert forward == backward


def test_the_input_memo_is_bounded_by_characters_not_entries() -> None:
    tool_input_json.cache_clear()
    big = json.dumps({"blob": "x" * 100_000})
    for n in range(50):
        assert tool_input_json(big[:-2] + f'{n}"}}').startswith('{"blob":')
    assert tool_input_json.chars == 0  # too large to keep
    for n in range(3000):
        tool_input_json(json.dumps({"n": n, "pad": "y" * 2000}))
    assert tool_input_json.chars <= tool_input_json.MAX_CHARS
    assert tool_input_json('{"a": 1}') == '{"a":1}'


@pytest.mark.parametrize("policy", list(CachePolicy))
def test_every_policy_builds_a_body_that_parses(policy: CachePolicy) -> None:
    body = request_json(AnthropicAdapter(), loop_after(call(cache=policy), 4))
    assert len(marks(body)) <= 4


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_first_request_marks_the_prefix_another_chat_sent_marked_within_its_lifetime(
) -> None:
    """Anthropic's cache is shared across the workspace's requests: a chat's first request
    reads the tools and system prompt another chat's request wrote, when this adapter
    sent them marked within the entry's lifetime (money3)."""
    adapter, clock = AnthropicAdapter(), Clock()
    adapter.warm_prefixes.clock = clock
    first = call(history=())
    assert marks(request_json(adapter, first)) == []  # cold: nothing known to read it
    assert marks(request_json(adapter, call())) == ["system", "m4:text", "m6:text"]
    clock.now += 200
    assert marks(request_json(adapter, first)) == ["system"]  # warm: read, nothing else
    clock.now += 250  # refreshed by the request above: 250 s is within its 5 minutes
    assert marks(request_json(adapter, first)) == ["system"]
    clock.now += 290  # past the lifetime less the margin: cold again
    assert marks(request_json(adapter, first)) == []
    other = call(history=(), system_prompt=BIG_SYSTEM + "Another rule.")
    assert marks(request_json(adapter, other)) == []  # another prefix is not warm
    hour = call(history=(), cache=CachePolicy.TTL_1H)
    assert marks(request_json(adapter, hour)) == []  # an hour's entry is another entry


def test_two_breakpoints_in_one_merged_message_mark_their_own_blocks() -> None:
    """A history that ends with a user message (an answer that rendered nothing) merges
    the new question into it: the previous question's block and the new one are marked
    in the same message, each in its place."""
    unanswered = (*history(3), msg(7, Role.USER, TextPart(text="question 3")),
                  msg(8, Role.ASSISTANT, TextPart(text=" ")))
    body = request_json(AnthropicAdapter(), call(history=unanswered))
    assert marks(body) == ["system", "m6:text", "m6:text"]
    blocks = body["messages"][6]["content"]
    assert [(b["text"], "cache_control" in b) for b in blocks] == [
        ("question 3", True), ("next", True)]


@pytest.mark.parametrize("iterations", [0, 1, 2, 5])
@pytest.mark.parametrize("system", [BIG_SYSTEM, ""])
def test_never_more_than_four_whatever_the_shape(iterations: int, system: str) -> None:
    long_loop = (msg(7, Role.USER, TextPart(text="check")), msg(8, Role.ASSISTANT, *[
        part for n in range(30) for part in (
            ToolCallPart(call_id=f"t{n}", name="clock", arguments="{}"),
            ToolResultPart(call_id=f"t{n}", name="clock", output="12:00 " * 300))]))
    first = call(system_prompt=system, history=history(3) + long_loop)
    body = request_json(AnthropicAdapter(), loop_after(first, iterations))
    assert 1 <= len(marks(body)) <= 4  # the short prefixes below the minimum go unmarked
