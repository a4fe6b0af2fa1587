"""Embedder (c), written from docs/api.md alone and checked with ``mypy --strict``: an
existing chat switched between providers and models mid-conversation with tool calls in
its history, then a message edited, one deleted and an answer regenerated (embed7)."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from typing import Any

from turnstate import (
    FilePart,
    GenerationSettings,
    ImagePart,
    Message,
    ProviderAdapter,
    Store,
    TextPart,
    Tool,
    ToolSpec,
    Transport,
    TurnAborted,
    TurnCompleted,
    TurnEngine,
    TurnInput,
)

PNG = b"\x89PNG\r\n\x1a\n" + bytes(64)
PDF = b"%PDF-1.4 " + bytes(64)


async def weather(arguments: dict[str, Any]) -> dict[str, Any]:
    return {"city": arguments.get("city"), "forecast": "sunny"}


TOOLS = (Tool(spec=ToolSpec(name="weather", description="Weather of a city",
                            parameters={"type": "object",
                                        "properties": {"city": {"type": "string"}},
                                        "required": ["city"]}),
              handler=weather, timeout=5.0),)

ROUTE = (  # (provider, model, settings) per turn, as the user picks them
    ("openai", "gpt-4.1", GenerationSettings(max_output_tokens=400, temperature=0.2)),
    ("anthropic", "claude-sonnet-4-5", GenerationSettings(max_output_tokens=800)),
    ("gemini", "gemini-3-pro-preview", GenerationSettings(reasoning_effort="low")),
    ("deepseek", "deepseek-reasoner", GenerationSettings(reasoning_effort="high")),
    ("openai-compatible", "gpt-4o", GenerationSettings(top_p=0.5)),
    ("openai", "gpt-5", GenerationSettings(reasoning_effort="minimal")),
)


async def one_turn(engine: TurnEngine, chat_id: str, turn: TurnInput) -> str:
    """The turn's outcome: ``completed <strategy>`` or ``aborted <reason>``."""
    outcome = "none"
    async with contextlib.aclosing(engine.run_turn(chat_id, turn)) as events:
        async for event in events:
            if event.type == "turn_completed":
                done: TurnCompleted = event
                outcome = f"completed {done.stats.requests}"
            elif event.type == "turn_aborted":
                aborted: TurnAborted = event
                outcome = f"aborted {aborted.reason}"
    return outcome


async def switching(store: Store, adapters: Mapping[str, ProviderAdapter],
                    transport: Transport) -> tuple[list[str], Sequence[Message]]:
    """Six turns over five providers, each asking for a tool, the first with an image
    and a PDF; then an edit, a delete and a regenerate on a seventh provider switch."""
    outcomes: list[str] = []
    async with TurnEngine(store, adapters, transport) as engine:
        chat = await store.create_chat(owner="carol")
        for n, (provider, model, settings) in enumerate(ROUTE):
            content: list[TextPart | ImagePart | FilePart] = [
                TextPart(text=f'[[call:weather {{"city": "C{n}"}}]] weather {n}?')]
            if n == 0:
                content += [ImagePart(media_type="image/png", data=PNG),
                            FilePart(data=PDF, filename="notes.pdf")]
            turn = TurnInput(provider=provider, model=model, system_prompt="Be brief.",
                             content=tuple(content), tools=TOOLS, settings=settings,
                             owner="carol")
            outcomes.append(await one_turn(engine, chat.id, turn))
        messages = await store.list_messages(chat.id, owner="carol")
        await store.edit_message(chat.id, messages[2].seq, [TextPart(text="edited question")],
                                 owner="carol")
        await store.delete_message(chat.id, messages[5].seq, owner="carol")  # an answer
        regenerate = TurnInput(provider="anthropic", model="claude-haiku-4-5",
                               system_prompt="Be brief.", user_text="and now?", tools=TOOLS,
                               owner="carol", replace_from=messages[-2].seq)
        outcomes.append(await one_turn(engine, chat.id, regenerate))
        return outcomes, await store.list_messages(chat.id, owner="carol")
