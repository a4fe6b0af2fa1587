"""Embedder (a), written from docs/api.md alone and checked with ``mypy --strict``: a chat
server's tools (async, one that times out, one that raises, one with a large result, one
that returns a chart's PNG bytes), each user's own model and per-turn limits, images and
PDFs attached (embed7)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping
from typing import Any

import attrs

from turnstate import (
    DEFAULT_REGISTRY,
    AnthropicAdapter,
    ChatCompletionsAdapter,
    DeepSeekAdapter,
    FilePart,
    GeminiInteractionsAdapter,
    GenerationSettings,
    ImagePart,
    InvalidInput,
    ModelInfo,
    OpenAIResponsesAdapter,
    ProviderAdapter,
    ReasoningEffort,
    Registry,
    Store,
    TextPart,
    Tool,
    ToolResultEvent,
    ToolSpec,
    Transport,
    TurnEngine,
    TurnInput,
    TurnLimits,
    UserPart,
)

PNG = b"\x89PNG\r\n\x1a\n" + bytes(64)
PDF = b"%PDF-1.4 " + bytes(64)
NO_ARGUMENTS: dict[str, Any] = {"type": "object", "properties": {}}


async def search(arguments: dict[str, Any]) -> list[dict[str, str]]:
    await asyncio.sleep(0)
    return [{"title": "Oslo", "snippet": "cold"}]


async def slow(arguments: dict[str, Any]) -> str:
    await asyncio.sleep(60)
    return "never"


async def broken(arguments: dict[str, Any]) -> str:
    msg = "database password=hunter2 unreachable"
    raise RuntimeError(msg)


async def dump(arguments: dict[str, Any]) -> str:
    return "row\n" * 50_000


async def chart(arguments: dict[str, Any]) -> bytes:
    return PNG


def tool(name: str, handler: Any, timeout: float = 5.0) -> Tool:
    return Tool(spec=ToolSpec(name=name, description=f"the {name} tool",
                              parameters=NO_ARGUMENTS), handler=handler, timeout=timeout)


TOOLS = (tool("search", search), tool("slow", slow, timeout=0.05), tool("broken", broken),
         tool("dump", dump), tool("chart", chart))


@attrs.frozen
class UserChoice:
    """What one user picked in the UI."""

    provider: str
    model: str
    max_output_tokens: int | None = None
    temperature: float | None = None
    effort: ReasoningEffort | None = None


def settings_for(choice: UserChoice) -> GenerationSettings:
    """One "reasoning" control: an effort where the provider takes one, a thinking budget
    on Anthropic (the error says which it takes)."""
    if choice.provider == "anthropic" and choice.effort is not None:
        budget = {"low": 1_024, "medium": 4_096, "high": 16_000}.get(choice.effort.value)
        return GenerationSettings(max_output_tokens=choice.max_output_tokens or 20_000,
                                  reasoning_budget_tokens=budget)
    return GenerationSettings(max_output_tokens=choice.max_output_tokens,
                              temperature=choice.temperature, reasoning_effort=choice.effort)


def registry_with_new_model() -> Registry:
    """A model newer than the registry, declared as the refusal's hint says."""
    return DEFAULT_REGISTRY.with_model(ModelInfo(
        provider="openai", name="gpt-5.2", context_limit=400_000, max_output_tokens=128_000,
        sampling=False, reasoning_efforts=frozenset({"low", "medium", "high"}),
        inputs=frozenset({"image", "file"})))


async def ask(engine: TurnEngine, chat_id: str, choice: UserChoice, text: str,
              attachments: tuple[UserPart, ...] = ()) -> tuple[str, list[ToolResultEvent]]:
    """One turn; its end and its tool results. A refusal is the user's 400."""
    turn = TurnInput(provider=choice.provider, model=choice.model, system_prompt="Be brief.",
                     content=(TextPart(text=text), *attachments), tools=TOOLS,
                     settings=settings_for(choice), owner="alice")
    results: list[ToolResultEvent] = []
    end = "none"
    try:
        async with contextlib.aclosing(engine.run_turn(chat_id, turn)) as events:
            async for event in events:
                if event.type == "tool_result":
                    results.append(event)
                elif event.type in ("turn_completed", "turn_aborted"):
                    end = event.type
    except InvalidInput as exc:
        return f"400 {exc.field}", results
    return end, results


def production_engine(store: Store, transport: Transport) -> TurnEngine:
    """The real providers, as a literal: no annotation needed for the adapters' mapping
    (mypy inferred ``dict[str, object]`` for five unrelated classes before embed7)."""
    adapters = {"openai": OpenAIResponsesAdapter(api_key="sk-test"),
                "anthropic": AnthropicAdapter(api_key="sk-test"),
                "gemini": GeminiInteractionsAdapter(api_key="test"),
                "deepseek": DeepSeekAdapter(api_key="sk-test"),
                "openai-compatible": ChatCompletionsAdapter(api_key="sk-test")}
    return TurnEngine(store, adapters, transport, registry=registry_with_new_model())


async def serve(store: Store, adapters: Mapping[str, ProviderAdapter],
                transport: Transport) -> list[tuple[str, list[ToolResultEvent]]]:
    """Each user's own model; the tools' results; a PDF and an image attached."""
    out: list[tuple[str, list[ToolResultEvent]]] = []
    limits = TurnLimits(max_tool_result_chars=10_000)
    async with TurnEngine(store, adapters, transport, limits=limits,
                          registry=registry_with_new_model()) as engine:
        chat = await store.create_chat(owner="alice")
        calls = "[[call:search]] [[call:slow]] [[call:broken]] [[call:dump]] [[call:chart]]"
        out.append(await ask(engine, chat.id, UserChoice("anthropic", "claude-sonnet-4-5",
                                                         effort=ReasoningEffort.LOW), calls))
        attached: tuple[UserPart, ...] = (ImagePart(media_type="image/png", data=PNG),
                                          FilePart(data=PDF, filename="report.pdf"))
        for choice in (UserChoice("openai", "gpt-5.2", effort=ReasoningEffort.HIGH),
                       UserChoice("gemini", "gemini-2.5-flash", temperature=0.3),
                       UserChoice("openai-compatible", "gpt-4o", max_output_tokens=300),
                       UserChoice("deepseek", "deepseek-chat")):
            out.append(await ask(engine, chat.id, choice, "what is in these?", attached))
    return out
