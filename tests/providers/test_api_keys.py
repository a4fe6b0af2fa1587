"""API keys come from configuration or the environment, and go only into auth headers."""

from __future__ import annotations

import pytest

from turnstate.core import DEFAULT_REGISTRY, Strategy
from turnstate.providers import (
    AnthropicAdapter,
    ChatCompletionsAdapter,
    DeepSeekAdapter,
    GeminiInteractionsAdapter,
    OpenAIResponsesAdapter,
    ProviderCall,
)

CASES = [
    (OpenAIResponsesAdapter, "OPENAI_API_KEY", "authorization", "Bearer {}", "gpt-4o"),
    (GeminiInteractionsAdapter, "GEMINI_API_KEY", "x-goog-api-key", "{}", "gemini-2.5-flash"),
    (ChatCompletionsAdapter, "OPENAI_API_KEY", "authorization", "Bearer {}", "gpt-4o-mini"),
    (DeepSeekAdapter, "DEEPSEEK_API_KEY", "authorization", "Bearer {}", "deepseek-chat"),
    (AnthropicAdapter, "ANTHROPIC_API_KEY", "x-api-key", "{}", "claude-sonnet-4-5"),
]


@pytest.mark.parametrize(("cls", "variable", "header", "shape", "model"), CASES)
def test_key_from_the_environment_or_the_argument(
    monkeypatch: pytest.MonkeyPatch, cls: type, variable: str, header: str, shape: str,
    model: str,
) -> None:
    """Without an argument the environment's key is used; an argument wins; the key is in
    the auth header and never in the adapter's repr."""
    monkeypatch.setenv(variable, "sk-from-env")
    adapter = cls()
    call = ProviderCall(strategy=Strategy.LOCAL_LOOP if adapter.provider not in
                        {"openai", "gemini"} else Strategy.REPLAY,
                        model=DEFAULT_REGISTRY.model(adapter.provider, model),
                        system_prompt="s", tools=(), user_text="hi")
    headers = {k.lower(): v for k, v in adapter.build_request(call).headers.items()}
    assert headers[header] == shape.format("sk-from-env")
    assert "sk-from-env" not in repr(adapter)
    explicit = cls(api_key="sk-explicit").build_request(call).headers
    assert {k.lower(): v for k, v in explicit.items()}[header] == shape.format("sk-explicit")
