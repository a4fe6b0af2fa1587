"""DeepSeek request building: thinking mode, the reasoning_content table, the stable prefix."""

from __future__ import annotations

from typing import Any

import pytest

from tests.providers.support import message as msg
from tests.providers.support import request_json
from turnstate.core._conversation import (
    Message,
    ReasoningPart,
    Role,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    ToolSpec,
)
from turnstate.core._decisions import Strategy
from turnstate.core._registry import DEFAULT_REGISTRY, ModelInfo, ReasoningReplay
from turnstate.providers._protocol import ProviderCall, ProviderResponse
from turnstate.providers.chat_completions import ChatCompletionsAdapter
from turnstate.providers.deepseek import DeepSeekAdapter

CHAT = DEFAULT_REGISTRY.model("deepseek", "deepseek-chat")
REASONER = DEFAULT_REGISTRY.model("deepseek", "deepseek-reasoner")
V4 = DEFAULT_REGISTRY.model("deepseek", "deepseek-v4-flash")
V32 = ModelInfo(provider="deepseek", name="deepseek-v3.2-thinking", context_limit=128_000,
                thinking=True, reasoning_replay=ReasoningReplay.TURN)
"""A deployment that registers V3.2's rules itself (the registry's names are V4 now)."""
TOOLS = (ToolSpec(name="weather", parameters={"type": "object", "properties": {
    "city": {"type": "string"}}}), ToolSpec(name="alpha", description="first by name"))


def thought(text: str, model: ModelInfo = V4, provider: str = "deepseek") -> ReasoningPart:
    return ReasoningPart(provider=provider, model=model.name, kind="reasoning_content", text=text)


def tool_call(call_id: str, model: ModelInfo = V4) -> ToolCallPart:
    return ToolCallPart(call_id=call_id, name="weather", arguments='{"city":"Oslo"}',
                        provider="deepseek", model=model.name)


def result(call_id: str) -> ToolResultPart:
    return ToolResultPart(call_id=call_id, name="weather", output="cold")


def tool_turn(model: ModelInfo) -> tuple[Message, ...]:
    """A committed turn: reasoning + call, result, reasoning + answer; then a plain turn."""
    return (msg(1, Role.USER, TextPart(text="weather?")),
            msg(2, Role.ASSISTANT, thought("need the tool", model), tool_call("c1", model),
                result("c1"), thought("now answer", model), TextPart(text="Cold.")),
            msg(3, Role.USER, TextPart(text="thanks")),
            msg(4, Role.ASSISTANT, thought("polite", model), TextPart(text="Welcome.")))


def make_call(model: ModelInfo, *history: Message, **changes: Any) -> ProviderCall:
    fields: dict[str, Any] = {"strategy": Strategy.LOCAL_LOOP, "model": model,
                              "system_prompt": "sys", "tools": TOOLS, "history": history,
                              "user_text": "more"}
    return ProviderCall(**{**fields, **changes})


def payload(call: ProviderCall) -> dict[str, Any]:
    decoded: dict[str, Any] = request_json(DeepSeekAdapter(), call)
    return decoded


def assistant_reasoning(messages: list[dict[str, Any]]) -> list[tuple[bool, Any]]:
    """(has tool calls, reasoning_content or the string MISSING) per assistant message."""
    return [(bool(m.get("tool_calls")), m.get("reasoning_content", "MISSING"))
            for m in messages if m["role"] == "assistant"]


def test_url_auth_and_provider_name() -> None:
    """POST {base}/chat/completions (no /v1) with Bearer auth; provider ``deepseek``."""
    adapter = DeepSeekAdapter(api_key="ds-key")
    request = adapter.build_request(make_call(CHAT))
    assert request.url == "https://api.deepseek.com/chat/completions"
    assert request.headers["authorization"] == "Bearer ds-key"
    assert adapter.provider == "deepseek" and "ds-key" not in repr(adapter)
    assert isinstance(adapter, ChatCompletionsAdapter)


def test_thinking_field_follows_the_model_info() -> None:
    """``thinking: enabled`` is sent exactly when the registry says the model thinks."""
    assert payload(make_call(V4))["thinking"] == {"type": "enabled"}
    assert payload(make_call(REASONER))["thinking"] == {"type": "enabled"}
    assert "thinking" not in payload(make_call(CHAT))
    body = payload(make_call(V4))
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}


@pytest.mark.parametrize(("model", "expected"), [
    (CHAT, [(True, "MISSING"), (False, "MISSING"), (False, "MISSING")]),
    (V32, [(True, "MISSING"), (False, "MISSING"), (False, "MISSING")]),
    (REASONER, [(True, "need the tool"), (False, ""), (False, "")]),
    (V4, [(True, "need the tool"), (False, ""), (False, "")]),
])
def test_history_reasoning_per_replay_rule(model: ModelInfo, expected: list[Any]) -> None:
    """History: NONE and TURN omit the key; TOOL_TURNS keeps tool-turn reasoning, else ""."""
    messages = payload(make_call(model, *tool_turn(model)))["messages"]
    assert assistant_reasoning(messages) == expected


@pytest.mark.parametrize(("model", "expected"), [
    (CHAT, "MISSING"), (V32, "thinking hard"), (REASONER, "thinking hard"),
    (V4, "thinking hard")])
def test_loop_sends_reasoning_back(model: ModelInfo, expected: str) -> None:
    """Within the tool loop thinking models send reasoning_content back; NONE never does."""
    adapter = DeepSeekAdapter()
    call = make_call(model)
    response = ProviderResponse(response_id="r", parts=(thought("thinking ", model),
                                                        thought("hard", model),
                                                        tool_call("c1", model)))
    loop = adapter.extend_loop(call, response, [result("c1")])
    assert assistant_reasoning(list(loop)) == [(True, expected)]
    assert loop[1] == {"role": "tool", "tool_call_id": "c1", "content": "cold"}


@pytest.mark.parametrize("model", [V32, REASONER, V4])
def test_loop_key_is_present_and_empty_without_reasoning(model: ModelInfo) -> None:
    """A thinking model's call made without reasoning still carries ``reasoning_content: ""``."""
    adapter = DeepSeekAdapter()
    call = make_call(model)
    response = ProviderResponse(response_id="r", parts=(tool_call("c1", model),))
    (assistant, _) = adapter.extend_loop(call, response, [result("c1")])
    assert assistant["reasoning_content"] == ""


def test_reasoning_of_another_provider_is_not_sent() -> None:
    """Reasoning another provider made becomes "" for a V4 request; another DeepSeek
    model's reasoning is DeepSeek's plain text and goes back (a tool turn needs it)."""
    other_model = ModelInfo(provider="deepseek", name="deepseek-v4-pro", context_limit=1,
                            reasoning_replay=ReasoningReplay.TOOL_TURNS, thinking=True)
    history = (msg(1, Role.USER, TextPart(text="q")),
               msg(2, Role.ASSISTANT, thought("pro thoughts", other_model),
                   thought("foreign", V4, provider="openai-compatible"), tool_call("c1"),
                   result("c1"), TextPart(text="a")),
               msg(3, Role.USER, TextPart(text="q2")),
               msg(4, Role.ASSISTANT, thought("foreign", V4, provider="openai-compatible"),
                   tool_call("c2"), result("c2"), TextPart(text="b")))
    messages = payload(make_call(V4, *history))["messages"]
    assert assistant_reasoning(messages) == [(True, "pro thoughts"), (False, ""),
                                             (True, ""), (False, "")]


def test_dated_snapshot_counts_as_the_same_model() -> None:
    """Reasoning stamped with a dated snapshot of the call's model is replayed."""
    dated = ReasoningPart(provider="deepseek", model="deepseek-v4-flash-20260101",
                          kind="reasoning_content", text="dated")
    history = (msg(1, Role.USER, TextPart(text="q")),
               msg(2, Role.ASSISTANT, dated, tool_call("c1"), result("c1"), TextPart(text="a")))
    assert assistant_reasoning(payload(make_call(V4, *history))["messages"])[0] == (True, "dated")


def test_system_first_and_tools_sorted_canonically() -> None:
    """The stable prefix: system first, tools by name, schema keys sorted."""
    body = payload(make_call(V4))
    assert body["messages"][0] == {"role": "system", "content": "sys"}
    assert [t["function"]["name"] for t in body["tools"]] == ["alpha", "weather"]
    assert list(body["tools"][1]["function"]["parameters"]) == ["properties", "type"]


def test_bytes_do_not_depend_on_tool_order_or_schema_key_order() -> None:
    """Whatever order the caller lists tools and schema keys in, the bytes are identical."""
    reordered = (ToolSpec(name="alpha", description="first by name"),
                 ToolSpec(name="weather", parameters={"properties": {"city": {"type": "string"}},
                                                      "type": "object"}))
    adapter = DeepSeekAdapter()
    history = tool_turn(V4)
    assert adapter.build_request(make_call(V4, *history)).body == \
        adapter.build_request(make_call(V4, *history, tools=reordered)).body
