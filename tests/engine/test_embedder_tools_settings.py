"""An embedder's mistakes with tools and settings get a clear answer, never a bare error
nor a setting silently ignored. Written from the README and docs/api.md only."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from turnstate import (
    AiohttpTransport,
    ConfigurationError,
    GenerationSettings,
    InvalidInput,
    MemoryStore,
    Tool,
    ToolSpec,
    TurnEngine,
    TurnEvent,
    TurnInput,
    TurnLimits,
)
from turnstate.emulators import EmulatedProviders
from turnstate.testing import emulated_providers  # noqa: F401  (the fixture)

CITY = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


@pytest.fixture
async def engine(emulated_providers: EmulatedProviders) -> AsyncIterator[TurnEngine]:  # noqa: F811
    async with AiohttpTransport() as transport:
        yield TurnEngine(MemoryStore(), emulated_providers.adapters, transport)


async def run(engine: TurnEngine, turn: TurnInput) -> list[TurnEvent]:
    chat = await engine.store.create_chat(owner="alice")
    return [event async for event in engine.run_turn(chat.id, turn)]


def sync_weather(args: dict[str, Any]) -> dict[str, Any]:  # forgot the ``async``
    return {"city": args["city"], "forecast": "sunny"}


def raises_at_once(args: dict[str, Any]) -> Any:  # a lambda-style wrapper that fails early
    raise KeyError("region")


@pytest.mark.parametrize("handler,expected", [
    (sync_weather, "its handler is not an async function"),
    (raises_at_once, "failed: KeyError"),
])
@pytest.mark.parametrize("provider,model", [("openai", "gpt-4o"),
                                            ("anthropic", "claude-sonnet-4-5")])
async def test_a_handler_that_is_not_async_is_the_tools_error_not_the_turns(
        engine: TurnEngine, provider: str, model: str, handler: Any, expected: str) -> None:
    """Before, the turn aborted ``internal_error`` (a bare ``TypeError`` from
    ``ensure_future`` of a dict, or the handler's own exception, outside the tool's
    error handling)."""
    tools = (Tool(spec=ToolSpec(name="weather", description="w", parameters=CITY),
                  handler=handler),)
    events = await run(engine, TurnInput(
        provider=provider, model=model, system_prompt="s", tools=tools,
        user_text='[[call:weather {"city": "Oslo"}]] weather?'))
    assert events[-1].type == "turn_completed"
    results = [e for e in events if e.type == "tool_result"]
    assert len(results) == 1 and results[0].is_error  # type: ignore[union-attr]
    assert expected in results[0].output  # type: ignore[union-attr]


@pytest.mark.parametrize("model", ["deepseek-reasoner", "deepseek-v4-flash", "deepseek-v4-pro"])
@pytest.mark.parametrize("field", ["temperature", "top_p"])
async def test_deepseek_thinking_refuses_sampling_it_would_ignore(
        engine: TurnEngine, model: str, field: str) -> None:
    """DeepSeek's thinking mode ignores ``temperature`` and ``top_p`` without an error
    (providers-wire.md 4.2): before, the turn sent them and the answer silently sampled
    as if they were unset."""
    settings = GenerationSettings(**{field: 0.5})
    with pytest.raises(InvalidInput) as caught:
        await run(engine, TurnInput(provider="deepseek", model=model, system_prompt="s",
                                    user_text="hi", settings=settings))
    assert caught.value.field == f"settings.{field}"
    assert "reasoning model" in caught.value.problem


async def test_deepseek_chat_still_takes_temperature(engine: TurnEngine) -> None:
    events = await run(engine, TurnInput(
        provider="deepseek", model="deepseek-chat", system_prompt="s", user_text="[[settings]]",
        settings=GenerationSettings(temperature=0.5)))
    assert events[-1].type == "turn_completed"


async def huge(args: dict[str, Any]) -> str:
    return "x" * 5_000_000  # a whole log file, say


async def test_a_huge_tool_result_is_cut_to_fit_not_the_turns_end(
        emulated_providers: EmulatedProviders) -> None:  # noqa: F811
    """Before, a 5 MB result went whole to the provider: on Anthropic's 200,000-token
    window the turn aborted ``context_overflow`` (a real API refuses it too)."""
    tools = (Tool(spec=ToolSpec(name="logs", description="w", parameters={"type": "object"}),
                  handler=huge),)
    async with AiohttpTransport() as transport:
        engine = TurnEngine(MemoryStore(), emulated_providers.adapters, transport)
        events = await run(engine, TurnInput(
            provider="anthropic", model="claude-sonnet-4-5", system_prompt="s", tools=tools,
            user_text="[[call:logs]] read the logs"))
        assert events[-1].type == "turn_completed", events[-1]
        (result,) = [e for e in events if e.type == "tool_result"]
        head, _, note = result.output.partition("\n[turnstate: ")  # type: ignore[union-attr]
        assert head == "x" * 200_000  # a quarter of the window, 4 characters a token
        assert note.startswith("the result was cut to its first 200,000 of 5,000,000")

        limits = TurnLimits(max_tool_result_chars=1_000)
        engine = TurnEngine(MemoryStore(), emulated_providers.adapters, transport,
                            limits=limits)
        events = await run(engine, TurnInput(
            provider="openai", model="gpt-4o", system_prompt="s", tools=tools,
            user_text="[[call:logs]] read the logs"))
        (result,) = [e for e in events if e.type == "tool_result"]
        assert result.output.startswith("x" * 1_000 + "\n[turnstate: ")  # type: ignore[union-attr]


def test_the_tool_result_limit_is_a_whole_number_from_1() -> None:
    with pytest.raises(ConfigurationError):
        TurnLimits(max_tool_result_chars=0)
