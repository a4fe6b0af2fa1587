"""An API key no HTTP header can carry is a ``ConfigurationError`` when the adapter is
built; surrounding whitespace is dropped (hunt-api).

A key holding a line break (read from a file with its newline, or pasted with one) was
taken, and every request then failed inside the turn, after its begin: aiohttp refuses
the header ("Forbidden control character detected in headers"), so every turn aborted
``provider_failed``. A number for the key raised a bare ``AttributeError``.
"""

from __future__ import annotations

from typing import Any

import pytest

from turnstate import (
    AnthropicAdapter,
    ChatCompletionsAdapter,
    ConfigurationError,
    DeepSeekAdapter,
    GeminiInteractionsAdapter,
    OpenAIResponsesAdapter,
)
from turnstate.providers._requests import key_or_env

ADAPTERS = [OpenAIResponsesAdapter, GeminiInteractionsAdapter, AnthropicAdapter,
            ChatCompletionsAdapter, DeepSeekAdapter]
SECRET = "sk-test-0123456789abcdef"


@pytest.mark.parametrize("adapter", ADAPTERS)
@pytest.mark.parametrize("key", [SECRET + "\nX-Evil: 1", "sk-a\rb", "sk-\x00", 5])
def test_a_key_no_header_can_carry_is_refused_when_built(adapter: Any, key: object) -> None:
    with pytest.raises(ConfigurationError, match="api_key") as caught:
        adapter(api_key=key)
    assert SECRET not in str(caught.value)


def test_a_key_from_the_environment_is_named_by_its_variable(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-a\nb")
    with pytest.raises(ConfigurationError, match="ANTHROPIC_API_KEY holds a control"):
        AnthropicAdapter()


def test_surrounding_whitespace_is_dropped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET + "\n")
    assert key_or_env("", "OPENAI_API_KEY") == SECRET
    assert key_or_env(f"  {SECRET}\r\n", "OPENAI_API_KEY") == SECRET
    assert OpenAIResponsesAdapter().api_key == SECRET


@pytest.mark.parametrize("adapter", ADAPTERS)
@pytest.mark.parametrize("url", ["not a url", "ftp://x.example", "https://", "api.openai.com/v1",
                                 "", None])
def test_a_base_url_that_is_not_http_is_refused_when_built(adapter: Any, url: object) -> None:
    """It was taken, and every turn failed after its begin (``InvalidUrlClientError``,
    ``NonHttpUrlClientError``)."""
    with pytest.raises(ConfigurationError, match="base_url must be an http or https URL"):
        adapter(api_key="k", base_url=url)


def test_a_refused_base_url_never_shows_its_credentials() -> None:
    with pytest.raises(ConfigurationError) as caught:
        ChatCompletionsAdapter(base_url="ftp://user:hunter2@proxy.example/v1")
    assert "hunter2" not in str(caught.value)
    assert ChatCompletionsAdapter(base_url="http://127.0.0.1:1/v1/")  # loopback http is fine
