"""Prefix stability of DeepSeek requests over generated multi-turn conversations."""

from __future__ import annotations

import itertools
import json
from datetime import UTC, datetime
from typing import Any

import attrs
from hypothesis import given
from hypothesis import strategies as st

from tests.strategies import PREFIX_TOOL_COUNT, prefix_conversations
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
from turnstate.core._registry import DEFAULT_REGISTRY, ModelInfo, ReasoningReplay
from turnstate.providers._protocol import ProviderCall, ProviderResponse
from turnstate.providers.deepseek import DeepSeekAdapter

NOW = datetime(2026, 1, 1, tzinfo=UTC)
TOOLS = (
    ToolSpec(name="weather", description="Weather.", parameters={
        "type": "object", "required": ["city"], "properties": {"city": {"type": "string"}}}),
    ToolSpec(name="clock", parameters={"properties": {}, "type": "object"}),
    ToolSpec(name="search", description="Search.", parameters={
        "properties": {"q": {"type": "string", "minLength": 1}}, "type": "object"}),
)
assert len(TOOLS) == PREFIX_TOOL_COUNT
ADAPTER = DeepSeekAdapter()

V32 = ModelInfo(provider="deepseek", name="deepseek-v3.2-thinking", context_limit=128_000,
                thinking=True, reasoning_replay=ReasoningReplay.TURN)
"""V3.2's rules as a deployment registers them (the registry's names follow V4)."""


@attrs.frozen(kw_only=True)
class Sent:
    """One request of the conversation and where it sits."""

    messages: list[str]  # each message's compact JSON
    tools: str
    turn: int
    first_of_turn: bool
    previous_turn_had_tools: bool
    raw_messages: list[dict[str, Any]]


def _reasoning(text: str | None, model: ModelInfo) -> list[Part]:
    if text is None:
        return []
    return [ReasoningPart(provider="deepseek", model=model.name, kind="reasoning_content",
                          text=text)]


def _response(step: dict[str, Any], model: ModelInfo, ids: itertools.count[int]) -> \
        ProviderResponse:
    parts: list[Part] = [*_reasoning(step["reasoning"], model)]
    if step["text"]:
        parts.append(TextPart(text=step["text"]))
    for tool, arguments in step.get("calls", ()):
        parts.append(ToolCallPart(call_id=f"call_{next(ids)}", name=TOOLS[tool].name,
                                  arguments=arguments, provider="deepseek", model=model.name))
    return ProviderResponse(response_id=None, parts=tuple(parts))


def _message(seq: int, role: Role, parts: list[Part]) -> Message:
    return Message(id=f"m{seq}", chat_id="c", seq=seq, role=role,
                   status=MessageStatus.COMPLETED, parts=tuple(parts), created_at=NOW,
                   updated_at=NOW)


def _sent(call: ProviderCall, turn: int, first: bool, had_tools: bool) -> Sent:
    body = json.loads(ADAPTER.build_request(call).body)
    return Sent(messages=[compact_json(m) for m in body["messages"]],
                tools=compact_json(body["tools"]), turn=turn, first_of_turn=first,
                previous_turn_had_tools=had_tools, raw_messages=body["messages"])


def conversation_requests(conversation: list[dict[str, Any]], model: ModelInfo) -> list[Sent]:
    """Every request a stateless driver sends for the conversation, in order."""
    history: list[Message] = []
    sent: list[Sent] = []
    ids = itertools.count(1)
    had_tools = False
    for number, turn in enumerate(conversation):
        call = ProviderCall(strategy=Strategy.LOCAL_LOOP, model=model, system_prompt="System.",
                            tools=tuple(TOOLS[i] for i in turn["tool_order"]),
                            history=tuple(history), user_text=turn["user_text"])
        parts: list[Part] = []
        for step in turn["rounds"]:
            sent.append(_sent(call, number, call.iteration == 0, had_tools))
            response = _response(step, model, ids)
            results = [ToolResultPart(call_id=c.call_id, name=c.name, output=output)
                       for c, output in zip(response.tool_calls, step["outputs"], strict=True)]
            parts += [*response.parts, *results]
            call = attrs.evolve(call, loop_messages=ADAPTER.extend_loop(call, response, results),
                                iteration=call.iteration + 1)
        sent.append(_sent(call, number, call.iteration == 0, had_tools))
        parts += _response(turn["final"], model, ids).parts
        history += [_message(len(history) + 1, Role.USER, [TextPart(text=turn["user_text"])]),
                    _message(len(history) + 2, Role.ASSISTANT, parts)]
        had_tools = bool(turn["rounds"])
    return sent


def _without_reasoning(messages: list[dict[str, Any]]) -> list[str]:
    return [compact_json({k: v for k, v in m.items() if k != "reasoning_content"})
            for m in messages]


def _starts_with(current: list[str], previous: list[str]) -> bool:
    return current[:len(previous)] == previous


@given(conversation=prefix_conversations(),
       model=st.sampled_from([DEFAULT_REGISTRY.model("deepseek", "deepseek-chat"),
                              DEFAULT_REGISTRY.model("deepseek", "deepseek-v4-flash")]))
def test_each_request_extends_the_previous_one(
    conversation: list[dict[str, Any]], model: ModelInfo
) -> None:
    """NONE and TOOL_TURNS models: every request's messages begin, byte for byte, with
    the previous request's messages, and the tools block never changes."""
    sent = conversation_requests(conversation, model)
    for previous, current in itertools.pairwise(sent):
        assert _starts_with(current.messages, previous.messages)
        assert current.tools == previous.tools


@given(conversation=prefix_conversations())
def test_turn_models_extend_except_for_dropped_loop_reasoning(
    conversation: list[dict[str, Any]]
) -> None:
    """TURN models (DeepSeek V3.2 rules): a request's messages begin
    byte for byte with the previous request's messages within a turn, and across a
    turn boundary when the previous turn made no tool calls. Across the boundary after
    a tool-loop turn the prefix holds once ``reasoning_content`` is removed from the
    previous request's messages: the V3.2 rule drops loop reasoning at the next user
    turn, and those bytes are what the context cache loses. The tools block never
    changes."""
    sent = conversation_requests(conversation, V32)
    for previous, current in itertools.pairwise(sent):
        assert current.tools == previous.tools
        if not current.first_of_turn or not current.previous_turn_had_tools:
            assert _starts_with(current.messages, previous.messages)
        else:
            assert _starts_with(current.messages, _without_reasoning(previous.raw_messages))


def test_turn_model_boundary_really_drops_reasoning_bytes() -> None:
    """For a TURN model the raw prefix breaks exactly at the loop's reasoning_content."""
    turn = {"user_text": "q", "tool_order": [0, 1, 2],
            "rounds": [{"reasoning": "why", "text": "", "calls": [(0, '{"city":"Oslo"}')],
                        "outputs": ["cold"]}],
            "final": {"reasoning": None, "text": "Cold."}}
    sent = conversation_requests([turn, dict(turn, user_text="again")],
                                 V32)
    last_of_first, first_of_second = sent[1], sent[2]
    assert not _starts_with(first_of_second.messages, last_of_first.messages)
    assert _starts_with(first_of_second.messages,
                        _without_reasoning(last_of_first.raw_messages))
    assert '"reasoning_content":"why"' in last_of_first.messages[2]
