"""An API key never goes out in clear by default: an adapter with a key and a plain
``http`` base URL to a host other than this machine is refused when it is built,
unless its caller opts in with ``allow_plain_http`` (a gateway on a trusted network)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from turnstate.core._errors import ConfigurationError
from turnstate.providers import (
    AnthropicAdapter,
    ChatCompletionsAdapter,
    DeepSeekAdapter,
    GeminiInteractionsAdapter,
    OpenAIResponsesAdapter,
)
from turnstate.server._providers import live_adapters

ADAPTERS: list[Callable[..., Any]] = [AnthropicAdapter, ChatCompletionsAdapter,
                                      DeepSeekAdapter, GeminiInteractionsAdapter,
                                      OpenAIResponsesAdapter]
KEY = "sk-attack5-secret-0123456789"


@pytest.mark.parametrize("make", ADAPTERS)
@pytest.mark.parametrize("url", ["http://gateway.lan:8000/v1", "http://10.0.0.7/v1",
                                 "HTTP://api.example.com/v1", "http://[fd00::1]:80/v1",
                                 "http://127.0.0.1.nip.io/v1"])
def test_a_key_over_plain_http_to_another_host_is_refused(make: Callable[..., Any],
                                                          url: str) -> None:
    with pytest.raises(ConfigurationError, match="allow_plain_http") as caught:
        make(base_url=url, api_key=KEY)
    assert KEY not in str(caught.value)


@pytest.mark.parametrize("make", ADAPTERS)
def test_a_password_in_a_plain_http_url_is_refused_too(make: Callable[..., Any]) -> None:
    # Credentials in a base URL are refused whatever its scheme since rough9 (aiohttp
    # refuses them beside the Authorization header), before the plain-http check.
    with pytest.raises(ConfigurationError, match="must not carry credentials") as caught:
        make(base_url="http://user:hunter2@gateway.lan/v1", api_key="")
    assert "hunter2" not in str(caught.value)


@pytest.mark.parametrize("make", ADAPTERS)
@pytest.mark.parametrize(("url", "key", "opt_in"), [
    ("https://gateway.lan/v1", KEY, False),  # TLS
    ("http://127.0.0.1:8080/v1", KEY, False),  # loopback: the emulators, a local server
    ("http://127.9.9.9/v1", KEY, False),
    ("http://localhost:11434/v1", KEY, False),
    ("http://[::1]:8080/v1", KEY, False),
    ("http://[::ffff:127.0.0.1]:8080/v1", KEY, False),
    ("http://gateway.lan:8000/v1", "", False),  # no key: nothing to lose
    ("http://gateway.lan:8000/v1", KEY, True),  # the caller's explicit choice
])
def test_tls_loopback_no_key_or_the_opt_in_are_taken(make: Callable[..., Any], url: str,
                                                     key: str, opt_in: bool,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    for variable in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY",
                     "DEEPSEEK_API_KEY"):
        monkeypatch.delenv(variable, raising=False)
    adapter = make(base_url=url, api_key=key, allow_plain_http=opt_in)
    assert adapter.url.startswith(url.rstrip("/").lower()[:4])


def test_the_server_opts_in_for_its_gateway_only_when_told() -> None:
    environ = {"OPENAI_COMPATIBLE_BASE_URL": "http://gateway.lan:8000/v1",
               "OPENAI_COMPATIBLE_API_KEY": KEY}
    with pytest.raises(ConfigurationError, match="allow_plain_http"):
        live_adapters(environ)
    adapters = live_adapters({**environ, "OPENAI_COMPATIBLE_ALLOW_PLAIN_HTTP": "1"})
    assert adapters["openai-compatible"].url == "http://gateway.lan:8000/v1/chat/completions"
    with pytest.raises(ConfigurationError, match="OPENAI_COMPATIBLE_ALLOW_PLAIN_HTTP"):
        live_adapters({**environ, "OPENAI_COMPATIBLE_ALLOW_PLAIN_HTTP": "yes please"})
