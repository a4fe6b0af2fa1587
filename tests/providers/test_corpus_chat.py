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
}
DEEPSEEK_CASES: dict[str, Case] = {}


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
