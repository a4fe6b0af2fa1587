"""An embedder's turn handler, written from docs/api.md alone and checked with
``mypy --strict`` by ``test_typed_program.py`` (the public API must type-check for the
embedder's own code, not only for the package's), then run against the emulators."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from turnstate import (
    AiohttpTransport,
    ChatBusy,
    Following,
    GenerationSettings,
    ImagePart,
    InvalidInput,
    LiveTurn,
    LoggedEvent,
    ProviderAdapter,
    Store,
    TextPart,
    Tool,
    ToolSpec,
    TurnAborted,
    TurnCompleted,
    TurnEngine,
    TurnEvent,
    TurnFinished,
    TurnInput,
    chat_cost,
    event_json,
)

PNG = b"\x89PNG\r\n\x1a\n" + bytes(32)


async def lookup(arguments: dict[str, Any]) -> dict[str, Any]:
    return {"found": arguments.get("query", "")}


TOOLS = (Tool(spec=ToolSpec(name="lookup", description="Look a word up.",
                            parameters={"type": "object",
                                        "properties": {"query": {"type": "string"}},
                                        "required": ["query"]}),
              handler=lookup, timeout=5.0),)


async def answer(engine: TurnEngine, chat_id: str, text: str) -> list[str]:
    """One turn streamed as the lines a client is sent, iterated as docs/api.md says."""
    turn = TurnInput(provider="openai", model="gpt-4o", system_prompt="Be brief.",
                     content=(TextPart(text=text), ImagePart(media_type="image/png",
                                                             data=PNG)),
                     tools=TOOLS, settings=GenerationSettings(max_output_tokens=200))
    lines: list[str] = []
    async with contextlib.aclosing(engine.run_turn(chat_id, turn)) as events:
        async for event in events:
            lines.append(event_json(event))
            if isinstance(event, TurnCompleted | TurnAborted):
                lines.append(event.type)
            lines.append(summary(event))
    return lines


def summary(event: TurnEvent) -> str:
    """What a log line says of an event: the ``type`` tag narrows the union."""
    if event.type == "text_delta":
        return event.text
    match event.type:
        case "turn_completed":
            return f"{event.finish_reason} {event.stats.cost}"
        case "turn_aborted":
            return event.reason
        case "tool_result":
            return f"{event.name} error={event.is_error}"
    return event.type


async def detached(engine: TurnEngine, chat_id: str, text: str) -> list[int]:
    turn = TurnInput(provider="openai", model="gpt-4o", system_prompt="Be brief.",
                     user_text=text)
    live: LiveTurn = await engine.start_turn(chat_id, turn)
    following: Following = await engine.follow(chat_id, live.turn_id)
    ids: list[int] = []
    async for event in following.events:
        logged: LoggedEvent = event
        ids.append(logged.id)
    with contextlib.suppress(TurnFinished):
        await engine.stop(live.turn_id, chat_id=chat_id)
    return ids


async def conversation(store: Store, adapters: Mapping[str, ProviderAdapter]
                       ) -> tuple[list[str], list[int], Decimal | None]:
    async with AiohttpTransport() as transport, \
            TurnEngine(store, adapters, transport) as engine:
        sweeper = asyncio.create_task(engine.maintain())
        chat = await store.create_chat(owner="alice")
        try:
            lines = await answer(engine, chat.id, "What is in the picture?")
        except (InvalidInput, ChatBusy) as exc:
            lines = [str(exc)]
        ids = await detached(engine, chat.id, "And now?")
        cost = chat_cost(await store.list_messages(chat.id))
    await asyncio.wait([sweeper])
    return lines, ids, None if cost is None else cost.total
