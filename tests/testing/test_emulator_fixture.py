"""``turnstate.testing.emulated_providers``: the documented fixture, used as an embedder
would (imported into the test module), runs a turn on every emulated provider."""

from __future__ import annotations

from turnstate import AiohttpTransport, MemoryStore, TurnCompleted, TurnEngine, TurnInput
from turnstate.testing import EmulatedProviders, emulated_providers

__all__ = ["emulated_providers"]  # the fixture, imported for pytest to find


async def test_the_fixture_starts_the_five_emulators(
    emulated_providers: EmulatedProviders,
) -> None:
    assert sorted(emulated_providers.adapters) == [
        "anthropic", "deepseek", "gemini", "openai", "openai-compatible"]
    store = MemoryStore()
    async with AiohttpTransport() as transport:
        engine = TurnEngine(store, emulated_providers.adapters, transport)
        chat = await store.create_chat(owner="o")
        models = {"openai": "gpt-4o", "gemini": "gemini-2.5-flash", "deepseek": "deepseek-chat",
                  "openai-compatible": "gpt-4o", "anthropic": "claude-sonnet-4-5"}
        for provider, model in models.items():
            events = [e async for e in engine.run_turn(chat.id, TurnInput(
                provider=provider, model=model, system_prompt="", user_text="hi"))]
            assert isinstance(events[-1], TurnCompleted)
            assert emulated_providers.emulators[provider].requests
