"""The Chat Completions and DeepSeek corpus: parts, finish, usage and loop replay."""

from __future__ import annotations

from typing import Any

import pytest

from tests.providers.corpus import Case, case_names, check, events, results_for, usage
from turnstate.core._decisions import Strategy
from turnstate.core._registry import DEFAULT_REGISTRY
from turnstate.providers import (
    ChatCompletionsAdapter,
    DeepSeekAdapter,
    ProviderCall,
    ProviderResponse,
)

CHAT = ChatCompletionsAdapter(base_url="http://127.0.0.1:1/v1", api_key="k")
DEEPSEEK = DeepSeekAdapter(base_url="http://127.0.0.1:1", api_key="k")


def loop_call(provider: str, model: str) -> ProviderCall:
    return ProviderCall(strategy=Strategy.LOCAL_LOOP, system_prompt="", tools=(),
                        model=DEFAULT_REGISTRY.model(provider, model), user_text="q")


def chat_replay(response: ProviderResponse) -> tuple[Any, ...]:
    return CHAT.extend_loop(loop_call("openai-compatible", "gpt-4o"), response,
                            results_for(response))


def deepseek_replay(response: ProviderResponse) -> tuple[Any, ...]:
    return DEEPSEEK.extend_loop(loop_call("deepseek", "deepseek-v4-flash"), response,
                                results_for(response))


def tool_call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function",
            "function": {"name": name, "arguments": arguments}}


def tool_message(call_id: str, name: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": f"ok:{name}"}


CHAT_CASES: dict[str, Case] = {
    "azure-empty-first-id": Case(
        response_id="chatcmpl-AzureRelay01", parts=(("text", "Paris is the capital."),),
        finish="stop", usage=usage(14, 6),
        replay=({"role": "assistant", "content": "Paris is the capital."},)),
    "multi-tool-use-parallel": Case(
        response_id="chatcmpl-Wrap01",
        parts=(("call", "call_Wrap01_0", "weather", '{"city":"Paris"}'),
               ("call", "call_Wrap01_1", "weather", '{"city":"Oslo"}')),
        finish="tool_calls", usage=usage(88, 41),
        replay=({"role": "assistant", "content": None, "tool_calls": [
                    tool_call("call_Wrap01_0", "weather", '{"city":"Paris"}'),
                    tool_call("call_Wrap01_1", "weather", '{"city":"Oslo"}')]},
                tool_message("call_Wrap01_0", "weather"),
                tool_message("call_Wrap01_1", "weather"))),
    "parallel-calls-interleaved": Case(
        parts=(("call", "call_P1", "weather", '{"city":"Paris"}'),
               ("call", "call_P2", "weather", '{"city":"Oslo"}')),
        finish="tool_calls", usage=usage(70, 34, cached=64),
        replay=({"role": "assistant", "content": None, "tool_calls": [
                    tool_call("call_P1", "weather", '{"city":"Paris"}'),
                    tool_call("call_P2", "weather", '{"city":"Oslo"}')]},
                tool_message("call_P1", "weather"), tool_message("call_P2", "weather"))),
    "tool-without-arguments": Case(
        parts=(("call", "call_T", "get_time", "{}"),), finish="tool_calls", usage=usage(30, 7),
        replay=({"role": "assistant", "content": None,
                 "tool_calls": [tool_call("call_T", "get_time", "{}")]},
                tool_message("call_T", "get_time"))),
    "length-unknown-fields": Case(
        parts=(("text", "Once upon a time"),), finish="length", usage=usage(10, 4),
        replay=({"role": "assistant", "content": "Once upon a time"},)),
    "refusal": Case(
        parts=(("text", "I'm sorry, I can't help with that."),), finish="refusal",
        usage=usage(18, 10),
        replay=({"role": "assistant", "content": "I'm sorry, I can't help with that."},)),
}
DEEPSEEK_REASONING = "The user asks about Paris. I'll call the weather tool."
DEEPSEEK_CASES: dict[str, Case] = {
    "reasoning-tool-call-cache": Case(
        response_id="ds-01",
        parts=(("reasoning", "reasoning_content", DEEPSEEK_REASONING, None, None),
               ("call", "call_00_ds", "weather", '{"city": "Paris"}')),
        finish="tool_calls", usage=usage(374, 60, cached=256, reasoning=16, hit=256, miss=118),
        replay=({"role": "assistant", "content": None,
                 "tool_calls": [tool_call("call_00_ds", "weather", '{"city": "Paris"}')],
                 "reasoning_content": DEEPSEEK_REASONING},
                tool_message("call_00_ds", "weather"))),
    "text-cache-hit": Case(
        parts=(("text", "Bonjour."),), finish="stop",
        usage=usage(128, 3, cached=128, hit=128, miss=0),
        replay=({"role": "assistant", "content": "Bonjour.", "reasoning_content": ""},)),
}


def test_every_corpus_stream_has_a_case() -> None:
    assert case_names("chat-completions") == set(CHAT_CASES)
    assert case_names("deepseek") == set(DEEPSEEK_CASES)


@pytest.mark.parametrize("name", sorted(CHAT_CASES))
def test_chat_corpus_stream(name: str) -> None:
    check(CHAT.stream_parser(), events("chat-completions", name, event_key=None),
          CHAT_CASES[name], chat_replay)


@pytest.mark.parametrize("name", sorted(DEEPSEEK_CASES))
def test_deepseek_corpus_stream(name: str) -> None:
    check(DEEPSEEK.stream_parser(), events("deepseek", name, event_key=None),
          DEEPSEEK_CASES[name], deepseek_replay)
