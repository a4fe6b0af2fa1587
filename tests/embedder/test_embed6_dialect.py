"""``ChatCompletionsAdapter(dialect=...)`` from the public API (embed6). docs/api.md named
the type as ``chat_completions._dialect.ChatDialect``, a private module (names that start
with ``_`` are never public), and exported it nowhere else; a wrong field name was a bare
``ValueError`` of attrs, not the ``ConfigurationError`` the docs give for a setting outside
its range."""

from __future__ import annotations

import json

import pytest

from turnstate import (
    AiohttpTransport,
    ChatCompletionsAdapter,
    ConfigurationError,
    GenerationSettings,
    MemoryStore,
    TurnEngine,
    TurnInput,
)
from turnstate.emulators import EmulatedProviders
from turnstate.testing import turn_events


async def test_the_legacy_dialect_from_the_public_package() -> None:
    from turnstate.providers.chat_completions import DIALECTS, ChatDialect

    assert isinstance(DIALECTS["legacy"], ChatDialect)
    options = {"openai-compatible": {"dialect": DIALECTS["legacy"]}}
    async with EmulatedProviders(providers=["openai-compatible"],
                                 adapter_options=options) as providers, \
            AiohttpTransport() as transport:
        assert isinstance(providers.adapters["openai-compatible"], ChatCompletionsAdapter)
        engine = TurnEngine(MemoryStore(), providers.adapters, transport)
        chat = await engine.store.create_chat(owner="o")
        turn = TurnInput(provider="openai-compatible", model="gpt-4o", system_prompt="s",
                         user_text="hi", settings=GenerationSettings(max_output_tokens=64))
        assert (await turn_events(engine.run_turn(chat.id, turn)))[-1].type == "turn_completed"
        body = json.loads(providers.emulators["openai-compatible"].requests[-1].body)
    assert body["max_tokens"] == 64 and "stream_options" not in body


def test_a_dialect_naming_an_unknown_field_is_a_configuration_error() -> None:
    from turnstate.providers.chat_completions import ChatDialect

    with pytest.raises(ConfigurationError, match="max_tokens_field"):
        ChatDialect(max_tokens_field="max_output_tokens")
