"""Where a server's provider adapters come from: the emulators or the real APIs.

``--live`` builds an adapter for each provider whose key is in the environment
(``OPENAI_API_KEY``, ``GEMINI_API_KEY``, ``ANTHROPIC_API_KEY``, ``DEEPSEEK_API_KEY``)
and, for ``openai-compatible``, when ``OPENAI_COMPATIBLE_BASE_URL`` is set (its key is
``OPENAI_COMPATIBLE_API_KEY``; ``OPENAI_COMPATIBLE_DIALECT``, ``openai`` by default or
``legacy`` for a server that takes ``max_tokens`` and no ``stream_options``:
``chat_completions._dialect``). Keys go straight into the adapters, never into a log.
A key goes to a plain ``http`` base URL only on loopback, unless
``OPENAI_COMPATIBLE_ALLOW_PLAIN_HTTP=1`` (a gateway on a trusted network) says so. A base
URL no request can use (a port past 65535 or no number, a user or password in it) is
refused at start rather than failing every turn.
"""

from __future__ import annotations

from collections.abc import Mapping

from turnstate.core._errors import ConfigurationError
from turnstate.providers import ADAPTERS
from turnstate.providers._protocol import ProviderAdapter
from turnstate.providers._requests import CREDENTIALS, base_url_problem
from turnstate.providers.chat_completions import ChatCompletionsAdapter
from turnstate.providers.chat_completions._dialect import DIALECTS

LIVE_KEYS = {"openai": "OPENAI_API_KEY", "gemini": "GEMINI_API_KEY",
             "anthropic": "ANTHROPIC_API_KEY", "deepseek": "DEEPSEEK_API_KEY"}
COMPATIBLE_URL = "OPENAI_COMPATIBLE_BASE_URL"
COMPATIBLE_KEY = "OPENAI_COMPATIBLE_API_KEY"
COMPATIBLE_DIALECT = "OPENAI_COMPATIBLE_DIALECT"
COMPATIBLE_PLAIN_HTTP = "OPENAI_COMPATIBLE_ALLOW_PLAIN_HTTP"


def live_adapters(environ: Mapping[str, str]) -> dict[str, ProviderAdapter]:
    """One adapter per provider configured in ``environ`` (possibly none)."""
    adapters: dict[str, ProviderAdapter] = {}
    for provider, variable in LIVE_KEYS.items():
        key = environ.get(variable, "").strip()
        if key:
            adapters[provider] = ADAPTERS[provider](api_key=key)
    base_url = environ.get(COMPATIBLE_URL, "").strip()
    if base_url:
        _check_base_url(base_url)
        name = environ.get(COMPATIBLE_DIALECT, "").strip() or "openai"
        if name not in DIALECTS:
            msg = f"{COMPATIBLE_DIALECT} must be one of {', '.join(DIALECTS)}, not {name!r}"
            raise ConfigurationError(msg)
        plain = environ.get(COMPATIBLE_PLAIN_HTTP, "").strip().lower()
        if plain not in {"", "0", "1", "false", "true"}:
            msg = f"{COMPATIBLE_PLAIN_HTTP} must be 1 or 0, not {plain!r}"
            raise ConfigurationError(msg)
        adapters["openai-compatible"] = ChatCompletionsAdapter(
            base_url=base_url, api_key=environ.get(COMPATIBLE_KEY, "").strip(),
            dialect=DIALECTS[name], allow_plain_http=plain in {"1", "true"})
    return adapters


def _check_base_url(url: str) -> None:
    """Refuse a base URL every request would fail on (``base_url_problem``, the adapters'
    own check), naming the variable, never the URL: it may hold a password."""
    problem = base_url_problem(url)
    if problem is not None:
        hint = f": put the key in {COMPATIBLE_KEY}" if problem == CREDENTIALS else ""
        msg = f"{COMPATIBLE_URL} {problem}{hint}"
        raise ConfigurationError(msg)
