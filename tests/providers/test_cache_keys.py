"""Stable prefixes for every provider: canonical tool order, deterministic bodies, and
OpenAI's ``prompt_cache_key`` derived from the chat without carrying its id."""

from __future__ import annotations

from typing import Any

import pytest

from tests.providers.support import request_json
from turnstate.core import CachePolicy
from turnstate.core._conversation import ToolSpec
from turnstate.core._decisions import Strategy
from turnstate.core._hashing import prompt_cache_key
from turnstate.core._registry import DEFAULT_REGISTRY
from turnstate.providers import (
    AnthropicAdapter,
    ChatCompletionsAdapter,
    DeepSeekAdapter,
    GeminiInteractionsAdapter,
    OpenAIResponsesAdapter,
)
from turnstate.providers._protocol import ProviderAdapter, ProviderCall

TOOLS = (ToolSpec(name="zeta", parameters={"type": "object", "properties": {
            "b": {"type": "string"}, "a": {"type": "integer"}}}),
         ToolSpec(name="alpha", description="First."), ToolSpec(name="mid"))
ADAPTERS: dict[str, ProviderAdapter] = {
    "openai": OpenAIResponsesAdapter(), "gemini": GeminiInteractionsAdapter(),
    "openai-compatible": ChatCompletionsAdapter(), "anthropic": AnthropicAdapter(),
    "deepseek": DeepSeekAdapter()}
MODELS = {"openai": "gpt-4o", "gemini": "gemini-2.5-flash", "openai-compatible": "gpt-4o",
          "anthropic": "claude-sonnet-4-5", "deepseek": "deepseek-chat"}


def call(provider: str, **changes: Any) -> ProviderCall:
    durable = provider in ("openai", "gemini")
    fields: dict[str, Any] = {
        "strategy": Strategy.REPLAY if durable else Strategy.LOCAL_LOOP,
        "model": DEFAULT_REGISTRY.model(provider, MODELS[provider]),
        "system_prompt": "Be kind.", "tools": TOOLS, "user_text": "hi",
        "cache_key": prompt_cache_key("chat-123")}
    return ProviderCall(**{**fields, **changes})


def tool_names(body: dict[str, Any]) -> list[str]:
    return [t.get("name") or t["function"]["name"] for t in body["tools"]]


@pytest.mark.parametrize("provider", sorted(ADAPTERS))
def test_tools_go_in_one_canonical_order_whatever_the_callers(provider: str) -> None:
    adapter = ADAPTERS[provider]
    forward = adapter.build_request(call(provider)).body
    for order in ((2, 0, 1), (1, 2, 0)):
        shuffled = tuple(TOOLS[i] for i in order)
        assert adapter.build_request(call(provider, tools=shuffled)).body == forward
    assert tool_names(request_json(adapter, call(provider))) == ["alpha", "mid", "zeta"]
    assert b'"properties":{"a":{"type":"integer"},"b":{"type":"string"}}' in forward


def test_the_cache_key_names_no_chat_and_is_stable() -> None:
    key = prompt_cache_key("chat-123")
    assert key == prompt_cache_key("chat-123") != prompt_cache_key("chat-124")
    assert "chat" not in key and "123" not in key and len(key) <= 64


@pytest.mark.parametrize("provider", ["openai", "openai-compatible"])
def test_openai_requests_carry_the_chats_cache_key_unless_caching_is_off(provider: str) -> None:
    adapter = ADAPTERS[provider]
    assert request_json(adapter, call(provider))["prompt_cache_key"] == prompt_cache_key(
        "chat-123")
    assert "prompt_cache_key" not in request_json(adapter, call(provider,
                                                                cache=CachePolicy.OFF))
    assert "prompt_cache_key" not in request_json(adapter, call(provider, cache_key=""))


@pytest.mark.parametrize("provider", ["gemini", "deepseek", "anthropic"])
def test_other_providers_get_no_cache_key_field(provider: str) -> None:
    assert "prompt_cache_key" not in request_json(ADAPTERS[provider], call(provider))


@pytest.mark.parametrize("base_url", [
    "https://api.groq.com/openai/v1", "https://api.cerebras.ai/v1",
    "https://integrate.api.nvidia.com/v1", "http://127.0.0.1:8000/v1"])
def test_an_unknown_compatible_server_gets_no_openai_only_field(base_url: str) -> None:
    # Groq/Cerebras/NVIDIA answer 400/422 "property 'prompt_cache_key' is unsupported".
    adapter = ChatCompletionsAdapter(base_url=base_url)
    assert "prompt_cache_key" not in request_json(adapter, call("openai-compatible"))
    opted_in = ChatCompletionsAdapter(base_url=base_url, prompt_cache_key=True)
    assert request_json(opted_in, call("openai-compatible"))["prompt_cache_key"]


def test_openai_itself_can_be_told_not_to_get_the_cache_key() -> None:
    adapter = ChatCompletionsAdapter(prompt_cache_key=False)
    assert "prompt_cache_key" not in request_json(adapter, call("openai-compatible"))
