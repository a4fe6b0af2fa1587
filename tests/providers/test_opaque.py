"""Opaque parts: logged once, counted for the audit, never sent to another provider."""

from __future__ import annotations

import logging

import pytest

from tests.providers.corpus import history
from turnstate.core._conversation import OpaquePart, TextPart, opaque_counts
from turnstate.core._decisions import Strategy
from turnstate.core._registry import DEFAULT_REGISTRY
from turnstate.providers import (
    AnthropicAdapter,
    ChatCompletionsAdapter,
    DeepSeekAdapter,
    GeminiInteractionsAdapter,
    OpenAIResponsesAdapter,
    ProviderAdapter,
    ProviderCall,
)
from turnstate.providers._opaque import _log_opaque, opaque_part

MARKER = "ws_marker_7f3a"
PART = OpaquePart(provider="openai", model="gpt-5-mini", kind="web_search_call",
                  raw=f'{{"type":"web_search_call","id":"{MARKER}","status":"completed"}}')


def test_an_unmodelled_block_is_logged_once_per_kind(caplog: pytest.LogCaptureFixture) -> None:
    _log_opaque.cache_clear()
    with caplog.at_level(logging.DEBUG, logger="turnstate"):
        for _ in range(3):
            opaque_part("anthropic", "m", {"type": "server_tool_use", "id": "s"})
        opaque_part("anthropic", "m", {"type": "web_search_tool_result"})
    lines = [r.getMessage() for r in caplog.records if "[provider][opaque]" in r.getMessage()]
    assert len(lines) == 2 and all(r.levelno == logging.DEBUG for r in caplog.records)
    assert "'server_tool_use'" in lines[0] and "'web_search_tool_result'" in lines[1]


def test_the_audit_counts_opaque_parts_by_kind() -> None:
    parts = (TextPart(text="a"), PART, PART,
             OpaquePart(provider="anthropic", model="m", kind="server_tool_use", raw="{}"))
    assert opaque_counts(parts) == {"web_search_call": 2, "server_tool_use": 1}
    assert opaque_counts((TextPart(text="a"),)) == {}


ADAPTERS: dict[str, tuple[ProviderAdapter, str, str]] = {
    "anthropic": (AnthropicAdapter(base_url="http://127.0.0.1:1"), "anthropic",
                  "claude-sonnet-4-5"),
    "chat": (ChatCompletionsAdapter(base_url="http://127.0.0.1:1"), "openai-compatible",
             "gpt-5-mini"),
    "deepseek": (DeepSeekAdapter(base_url="http://127.0.0.1:1"), "deepseek",
                 "deepseek-v4-flash"),
    "gemini": (GeminiInteractionsAdapter(base_url="http://127.0.0.1:1"), "gemini",
               "gemini-3-flash-preview"),
    "openai-other-model": (OpenAIResponsesAdapter(base_url="http://127.0.0.1:1"), "openai",
                           "gpt-4.1"),
}


@pytest.mark.parametrize("name", sorted(ADAPTERS))
def test_an_opaque_part_never_reaches_another_provider_or_model(name: str) -> None:
    adapter, provider, model = ADAPTERS[name]
    call = ProviderCall(strategy=Strategy.REPLAY, tools=(), system_prompt="", user_text="n",
                        model=DEFAULT_REGISTRY.model(provider, model),
                        history=history("q", (PART, TextPart(text="answer"))))
    body = adapter.build_request(call).body.decode()
    assert "answer" in body and MARKER not in body


def test_an_opaque_part_reaches_its_own_model() -> None:
    adapter = OpenAIResponsesAdapter(base_url="http://127.0.0.1:1")
    call = ProviderCall(strategy=Strategy.REPLAY, tools=(), system_prompt="", user_text="n",
                        model=DEFAULT_REGISTRY.model("openai", "gpt-5-mini"),
                        history=history("q", (PART, TextPart(text="answer"))))
    assert MARKER in adapter.build_request(call).body.decode()
