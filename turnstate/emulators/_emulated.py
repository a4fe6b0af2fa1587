"""The five provider emulators on loopback, with adapters pointed at them.

``EmulatedProviders`` starts every emulator (or the ones named) on free 127.0.0.1
ports and builds one adapter per provider, so ``TurnEngine(store, stack.adapters,
transport)`` talks real HTTP to real wire formats with no keys and no network. Used by
``turnstate demo``, ``turnstate emulate`` and the engine tests.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import attrs

from turnstate.core._errors import ConfigurationError
from turnstate.emulators._anthropic import AnthropicEmulator
from turnstate.emulators._base import ChainedEmulator, EmulatorBase, EmulatorServer
from turnstate.emulators._chat_completions import ChatCompletionsEmulator
from turnstate.emulators._deepseek import DeepSeekEmulator
from turnstate.emulators._gemini import GeminiInteractionsEmulator
from turnstate.emulators._responses import OpenAIResponsesEmulator
from turnstate.providers import ADAPTERS
from turnstate.providers._protocol import ProviderAdapter

EMULATOR_API_KEY = "emulator-key"


@attrs.frozen
class ProviderKind:
    """One provider's adapter and emulator classes."""

    adapter: Callable[..., ProviderAdapter]
    emulator: Callable[[], EmulatorBase]

    @property
    def api_prefix(self) -> str:
        return str(getattr(self.emulator, "API_PREFIX", ""))


EMULATORS: dict[str, Callable[[], EmulatorBase]] = {
    "openai": OpenAIResponsesEmulator,
    "gemini": GeminiInteractionsEmulator,
    "openai-compatible": ChatCompletionsEmulator,
    "deepseek": DeepSeekEmulator,
    "anthropic": AnthropicEmulator,
}
PROVIDER_KINDS: dict[str, ProviderKind] = {
    name: ProviderKind(ADAPTERS[name], emulator) for name, emulator in EMULATORS.items()}


def kind_of(provider: str) -> ProviderKind:
    try:
        return PROVIDER_KINDS[provider]
    except KeyError:
        msg = f"unknown provider {provider!r}; choose one of {', '.join(PROVIDER_KINDS)}"
        raise ConfigurationError(msg) from None


class EmulatedProviders:
    """Emulators on loopback and adapters for them; an async context manager.

    Args:
        providers: which providers to start (default: all five).
        adapter_options: extra constructor options per provider's adapter.
    """

    def __init__(self, providers: Iterable[str] | None = None,
                 adapter_options: dict[str, dict[str, Any]] | None = None) -> None:
        names = list(providers or PROVIDER_KINDS)
        self.kinds = {name: kind_of(name) for name in names}
        self.options = adapter_options or {}
        self.emulators: dict[str, EmulatorBase] = {n: k.emulator() for n, k in self.kinds.items()}
        self.servers: dict[str, EmulatorServer] = {}
        self.adapters: dict[str, ProviderAdapter] = {}

    def base_url(self, provider: str) -> str:
        return self.servers[provider].base_url + self.kinds[provider].api_prefix

    def chained(self, provider: str) -> ChainedEmulator:
        """The emulator of a provider that keeps cursors (``openai``, ``gemini``), typed
        as such: its ``expire(cursor)`` and ``evict_all()`` lose stored conversations as
        the provider would (``emulators[provider]`` is typed as the base class, which
        has neither). ``ConfigurationError`` for a provider that keeps none."""
        emulator = self.emulators.get(provider)
        if not isinstance(emulator, ChainedEmulator):
            msg = f"{provider!r} keeps no cursors here: no chained emulator to expire"
            raise ConfigurationError(msg)
        return emulator

    async def start(self) -> EmulatedProviders:
        for name, emulator in self.emulators.items():
            self.servers[name] = await EmulatorServer(emulator).start()
            self.adapters[name] = self.kinds[name].adapter(
                base_url=self.base_url(name), api_key=EMULATOR_API_KEY,
                **self.options.get(name, {}))
        return self

    async def close(self) -> None:
        for server in self.servers.values():
            await server.close()
        self.servers.clear()

    async def __aenter__(self) -> EmulatedProviders:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
