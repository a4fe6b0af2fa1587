"""Anthropic request building: system, content blocks, tool pairing, thinking, tools."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.providers.support import message as msg
from tests.providers.support import request_json
from tests.strategies import wire_part_lists
from turnstate.core._conversation import (
    Message,
    OpaquePart,
    Part,
    ReasoningPart,
    Role,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    ToolSpec,
    TransitionPart,
)
from turnstate.core._decisions import Strategy, TurnContext
from turnstate.core._envelope import Mode
from turnstate.core._errors import ConfigurationError
from turnstate.core._json import compact_json
from turnstate.core._registry import DEFAULT_REGISTRY, ModelInfo
from turnstate.providers._protocol import ProviderCall, ProviderResponse
from turnstate.providers.anthropic import AnthropicAdapter, merge_roles
from turnstate.providers.anthropic._blocks import (
    history_messages,
    render_parts_blocks,
    tool_input,
)

NOW = datetime(2026, 1, 1, tzinfo=UTC)
SONNET = DEFAULT_REGISTRY.model("anthropic", "claude-sonnet-4-5")
HAIKU_3 = DEFAULT_REGISTRY.model("anthropic", "claude-3-5-haiku")
WEATHER = ToolSpec(name="weather", description="Weather.", parameters={
    "type": "object", "required": ["city"], "properties": {"city": {"type": "string"}}})
CLOCK = ToolSpec(name="clock")


def make_call(*history: Message, model: ModelInfo = SONNET, **changes: Any) -> ProviderCall:
    fields: dict[str, Any] = {"strategy": Strategy.LOCAL_LOOP, "model": model,
                              "system_prompt": "Be kind.", "tools": (WEATHER,),
                              "history": history, "user_text": "next"}
    return ProviderCall(**{**fields, **changes})


def payload(call: ProviderCall, adapter: AnthropicAdapter | None = None) -> dict[str, Any]:
    decoded: dict[str, Any] = request_json(adapter or AnthropicAdapter(), call)
    return decoded


def thinking(text: str = "hmm", model: str = "claude-sonnet-4-5") -> ReasoningPart:
    return ReasoningPart(provider="anthropic", model=model, kind="thinking", text=text,
                         signature="sig-" + text)


def use(call_id: str) -> ToolCallPart:
    return ToolCallPart(call_id=call_id, name="weather", arguments='{"city": "Paris"}',
                        provider="anthropic", model="claude-sonnet-4-5")


def result(call_id: str, *, is_error: bool = False) -> ToolResultPart:
    return ToolResultPart(call_id=call_id, name="weather", output="sunny", is_error=is_error)


def test_request_shape_and_headers() -> None:
    """POST {base}/messages with x-api-key, anthropic-version and a streaming body."""
    adapter = AnthropicAdapter(base_url="http://127.0.0.1:1/v1", api_key="sk-ant-x")
    request = adapter.build_request(make_call())
    assert request.url == "http://127.0.0.1:1/v1/messages"
    assert request.headers["x-api-key"] == "sk-ant-x"
    assert request.headers["anthropic-version"] == "2023-06-01"
    assert "authorization" not in request.headers
    body = json.loads(request.body)
    assert body["model"] == "claude-sonnet-4-5" and body["max_tokens"] == 4096
    assert body["stream"] is True and body["system"] == "Be kind."
    assert "sk-ant-x" not in repr(adapter) + repr(request)
    assert AnthropicAdapter().url == "https://api.anthropic.com/v1/messages"
    assert adapter.provider == "anthropic"


def test_max_tokens_option_and_empty_system() -> None:
    """``max_tokens`` is a constructor option; an empty system prompt is left out."""
    body = payload(make_call(system_prompt=""), AnthropicAdapter(max_tokens=512))
    assert body["max_tokens"] == 512 and "system" not in body
    assert body["messages"] == [{"role": "user", "content": [{"type": "text", "text": "next"}]}]


def test_history_renders_as_content_blocks() -> None:
    """User text, assistant text, then the new user message, each as blocks."""
    history = (msg(1, Role.USER, TextPart(text="hi")), msg(2, Role.ASSISTANT, TextPart(text="yo")))
    assert payload(make_call(*history))["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "hi"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "yo"}]},
        {"role": "user", "content": [{"type": "text", "text": "next"}]},
    ]


def test_tool_use_answered_in_the_next_user_message() -> None:
    """[text, A, B, result A, result B, text] → assistant, user(tool_results), assistant."""
    parts = (TextPart(text="Checking."), use("A"), use("B"), result("A"),
             result("B", is_error=True), TextPart(text="Sunny."))
    messages = payload(make_call(msg(1, Role.USER, TextPart(text="q")),
                                 msg(2, Role.ASSISTANT, *parts)))["messages"]
    assert messages[1] == {"role": "assistant", "content": [
        {"type": "text", "text": "Checking."},
        {"type": "tool_use", "id": "A", "name": "weather", "input": {"city": "Paris"}},
        {"type": "tool_use", "id": "B", "name": "weather", "input": {"city": "Paris"}}]}
    assert messages[2] == {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "A", "content": "sunny", "is_error": False},
        {"type": "tool_result", "tool_use_id": "B", "content": "sunny", "is_error": True}]}
    assert messages[3] == {"role": "assistant", "content": [{"type": "text", "text": "Sunny."}]}


def test_consecutive_roles_are_merged() -> None:
    """A turn that ended on tool results merges them with the next user text."""
    history = (msg(1, Role.USER, TextPart(text="q")), msg(2, Role.ASSISTANT, use("A"), result("A")))
    messages = payload(make_call(*history))["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    assert [b["type"] for b in messages[2]["content"]] == ["tool_result", "text"]
    assert merge_roles([("user", ['{"type":"text","text":"a"}']),
                        ("user", ['{"type":"text","text":"b"}']),
                        ("assistant", ['{"type":"text","text":"c"}'])]) == [
        '{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}',
        '{"role":"assistant","content":[{"type":"text","text":"c"}]}']


def test_thinking_is_omitted_from_completed_turns() -> None:
    """Earlier, completed turns carry no thinking blocks."""
    history = (msg(1, Role.USER, TextPart(text="q")),
               msg(2, Role.ASSISTANT, thinking(), use("A"), result("A"), thinking("b"),
                   TextPart(text="done")))
    assert "thinking" not in json.dumps(payload(make_call(*history))["messages"])


def test_loop_sends_thinking_back_first_and_unchanged() -> None:
    """In the loop the thinking blocks lead their assistant message, text and signature intact."""
    adapter = AnthropicAdapter()
    call = make_call()
    redacted = ReasoningPart(provider="anthropic", model="claude-sonnet-4-5-20250929",
                             kind="redacted_thinking", data="opaque==")
    response = ProviderResponse(response_id="msg_1", parts=(
        TextPart(text="Let me see."), thinking("first"), redacted, use("A")))
    loop = adapter.extend_loop(call, response, [result("A")])
    assert loop[0] == {"role": "assistant", "content": [
        {"type": "thinking", "thinking": "first", "signature": "sig-first"},
        {"type": "redacted_thinking", "data": "opaque=="},
        {"type": "text", "text": "Let me see."},
        {"type": "tool_use", "id": "A", "name": "weather", "input": {"city": "Paris"}}]}
    assert loop[1]["role"] == "user" and loop[1]["content"][0]["tool_use_id"] == "A"
    second = attrs.evolve(call, loop_messages=loop, iteration=1)
    assert payload(second)["messages"][-2:] == list(loop)


def test_loop_drops_thinking_of_another_model_or_provider() -> None:
    """Only thinking made by the call's provider and model goes back."""
    foreign = ReasoningPart(provider="openai", model="claude-sonnet-4-5", kind="thinking",
                            text="x", signature="s")
    other = thinking("y", model="claude-opus-4-1")
    response = ProviderResponse(response_id="m", parts=(foreign, other, use("A")))
    (assistant, _) = AnthropicAdapter().extend_loop(make_call(), response, [result("A")])
    assert [b["type"] for b in assistant["content"]] == ["tool_use"]


def test_thinking_parameter_needs_a_budget_and_a_thinking_model() -> None:
    """``thinking`` is sent with the budget when set and the model supports it."""
    adapter = AnthropicAdapter(thinking_budget_tokens=2048)
    assert payload(make_call(), adapter)["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert "thinking" not in payload(make_call(model=HAIKU_3), adapter)
    assert "thinking" not in payload(make_call())


@pytest.mark.parametrize(("options", "match"), [
    ({"thinking_budget_tokens": 512}, "at least 1024"),
    ({"thinking_budget_tokens": 4096}, "below max_tokens"),
    ({"max_tokens": 0}, "positive")])
def test_bad_options_are_configuration_errors(options: dict[str, int], match: str) -> None:
    """Budgets outside [1024, max_tokens) and a non-positive max_tokens are refused."""
    with pytest.raises(ConfigurationError, match=match):
        AnthropicAdapter(**options)


def test_tools_use_input_schema_sorted_canonically() -> None:
    """Tools carry ``input_schema``, sorted by name with sorted keys, in any given order."""
    adapter = AnthropicAdapter()
    one = adapter.build_request(make_call(tools=(WEATHER, CLOCK))).body
    two = adapter.build_request(make_call(tools=(CLOCK, WEATHER))).body
    assert one == two
    tools = json.loads(one)["tools"]
    assert tools == [
        {"name": "clock", "input_schema": {"properties": {}, "type": "object"}},
        {"name": "weather", "description": "Weather.", "input_schema": {
            "properties": {"city": {"type": "string"}}, "required": ["city"],
            "type": "object"}}]
    assert "tools" not in payload(make_call(tools=()))


def test_non_object_arguments_become_an_empty_input() -> None:
    """Arguments that are not a JSON object (another provider's text) render as ``{}``."""
    odd = ToolCallPart(call_id="A", name="weather", arguments="not json")
    messages = payload(make_call(msg(1, Role.USER, TextPart(text="q")),
                                 msg(2, Role.ASSISTANT, odd, result("A"))))["messages"]
    assert messages[1]["content"][0]["input"] == {}


def test_loop_is_a_byte_prefix_of_the_next_turn_without_thinking() -> None:
    """Without thinking, the turn's last request is a prefix of the next turn's request."""
    adapter = AnthropicAdapter()
    first = make_call(user_text="weather?")
    response = ProviderResponse(response_id="m", parts=(use("A"),))
    last = attrs.evolve(first, loop_messages=adapter.extend_loop(first, response, [result("A")]))
    committed = (msg(1, Role.USER, TextPart(text="weather?")),
                 msg(2, Role.ASSISTANT, use("A"), result("A"), TextPart(text="Sunny.")))
    before = [json.dumps(m) for m in payload(last)["messages"]]
    after = [json.dumps(m) for m in payload(make_call(*committed, user_text="ok"))["messages"]]
    assert after[:len(before)] == before


def test_envelope_is_a_stateless_loop() -> None:
    """The Anthropic envelope is a stateless loop with no cursor."""
    ctx = TurnContext(provider="anthropic", model_name="claude-sonnet-4-5",
                      system_prompt_hash="s", toolset_hash="t")
    envelope = AnthropicAdapter().envelope(ctx, ProviderResponse(response_id="msg", parts=()),
                                           loop_messages=(), now=NOW, covers_seq=2)
    assert envelope.mode is Mode.STATELESS_LOOP and envelope.cursor is None


def parts_of(specs: list[tuple[Any, ...]]) -> tuple[Part, ...]:
    """Parts from the plain tuples of ``tests.strategies.wire_part_lists``."""
    out: list[Part] = []
    for spec in specs:
        if spec[0] == "text":
            out.append(TextPart(text=spec[1]))
        elif spec[0] == "call":
            out.append(ToolCallPart(call_id=spec[1], name=spec[2], arguments=spec[3]))
        elif spec[0] == "result":
            out.append(ToolResultPart(call_id=spec[1], name="t", output=spec[2],
                                      is_error=spec[3]))
        else:
            out.append(ReasoningPart(provider=spec[1], model=spec[2], kind=spec[3],
                                     text=spec[4], signature=spec[5], data=spec[6]))
    return tuple(out)


@given(specs=wire_part_lists, user=st.text(max_size=10), system=st.text(max_size=5))
def test_body_and_loop_are_exactly_compact_json(
    specs: list[tuple[Any, ...]], user: str, system: str
) -> None:
    """The hand-written body equals ``compact_json`` of its payload; the loop re-renders
    to the same bytes."""
    adapter = AnthropicAdapter(thinking_budget_tokens=1024)
    parts = parts_of(specs)
    history = (msg(1, Role.USER, TextPart(text=user)), msg(2, Role.ASSISTANT, *parts))
    call = make_call(*history, user_text=user, system_prompt=system)
    body = adapter.build_request(call).body
    assert compact_json(json.loads(body)).encode("utf-8") == body
    response = ProviderResponse(response_id="m", parts=parts)
    loop = adapter.extend_loop(call, response, [])
    looped = adapter.build_request(attrs.evolve(call, loop_messages=loop)).body
    assert compact_json(json.loads(looped)).encode("utf-8") == looped


@given(arguments=st.one_of(
    st.text(max_size=12),
    st.dictionaries(st.text(max_size=4), st.integers(), max_size=3).flatmap(
        lambda d: st.sampled_from([json.dumps(d), f" {json.dumps(d, indent=1)}\n",
                                   json.dumps(d) + " tail", json.dumps([d])]))))
def test_tool_input_agrees_with_json_loads(arguments: str) -> None:
    """The fast argument parser accepts exactly what ``json.loads`` accepts as an object."""
    try:
        expected = json.loads(arguments)
    except ValueError:
        expected = {}
    assert tool_input(arguments) == (expected if isinstance(expected, dict) else {})


@given(specs=wire_part_lists, extra=st.lists(st.sampled_from([
    TransitionPart(reason="cursor_invalid", strategy="replay", source_state="validate"),
    OpaquePart(provider="anthropic", model="claude-sonnet-4-5", kind="server_tool_use",
               raw='{"type":"server_tool_use","id":"s","name":"web_search","input":{}}'),
    TextPart(text=""),
]), max_size=3), at=st.integers(0, 8))
def test_history_rendering_is_the_general_rendering_without_kept_blocks(
    specs: list[tuple[Any, ...]], extra: list[Part], at: int
) -> None:
    """The replay's fast path renders a completed turn's parts exactly as
    ``render_parts_blocks`` does with nothing kept (transition, opaque and empty text
    parts anywhere included)."""
    parts = list(parts_of(specs))
    for part in extra:
        parts.insert(min(at, len(parts)), part)
    expected = [(role, ",".join(blocks)) for role, blocks in render_parts_blocks(parts, None)]
    assert history_messages(parts) == expected
