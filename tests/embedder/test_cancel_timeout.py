"""A deadline around ``run_turn`` (``asyncio.timeout``, ``asyncio.wait_for``), as an
embedder bounds a request, on the in-memory store and on an SQLite file (whose writes hop
to a worker thread): when the deadline passes while the provider has not answered, the
turn is recorded ``aborted`` / ``cancelled`` before ``TimeoutError`` reaches the caller,
its lease is released, nothing of it is half-written, and the next turn on the chat
starts at once (embed4)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from turnstate import (
    AiohttpTransport,
    MemoryStore,
    MessageStatus,
    SqliteStore,
    Store,
    TurnEngine,
    TurnInput,
)
from turnstate.emulators import EmulatedProviders, Fault
from turnstate.storage import TurnStatus
from turnstate.testing import emulated_providers

__all__ = ["emulated_providers"]  # the fixture, imported for pytest

DEADLINE = 0.3
"""Seconds the embedder allows; the provider is held (a gate never opened) past it."""


@pytest.fixture(params=["memory", "sqlite"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    if request.param == "memory":
        yield MemoryStore()
        return
    async with SqliteStore.open(str(tmp_path / "chats.sqlite")) as opened:
        yield opened


async def consume(engine: TurnEngine, chat_id: str, turn: TurnInput) -> list[str]:
    seen: list[str] = []
    async with contextlib.aclosing(engine.run_turn(chat_id, turn)) as events:
        async for event in events:
            seen.append(event.type)
    return seen


@pytest.mark.parametrize("how", ["timeout", "wait_for"])
@pytest.mark.parametrize(("provider", "model"), [("openai", "gpt-4o"),
                                                 ("anthropic", "claude-sonnet-4-5")])
async def test_a_deadline_leaves_the_chat_usable_at_once(
        emulated_providers: EmulatedProviders, store: Store, how: str, provider: str,
        model: str) -> None:
    async with AiohttpTransport() as transport:
        engine = TurnEngine(store, emulated_providers.adapters, transport)
        chat = await store.create_chat(owner="o")
        first = TurnInput(provider=provider, model=model, system_prompt="s", user_text="hi")
        assert (await consume(engine, chat.id, first))[-1] == "turn_completed"
        cursor = (await store.load_chat(chat.id)).last_provider_state
        held = asyncio.Event()  # never set: the provider does not answer in time
        emulated_providers.emulators[provider].faults.push(Fault(gate=held))
        slow = TurnInput(provider=provider, model=model, system_prompt="s",
                         user_text="slow", turn_id="t-slow")
        with pytest.raises(TimeoutError):
            if how == "timeout":
                async with asyncio.timeout(DEADLINE):
                    await consume(engine, chat.id, slow)
            else:
                await asyncio.wait_for(consume(engine, chat.id, slow), DEADLINE)
        record = await store.load_turn("t-slow")  # recorded before the error came out
        assert (record.status, record.reason) == (TurnStatus.ABORTED, "cancelled")
        row = await store.load_chat(chat.id)
        assert row.active_turn_id is None and row.last_provider_state == cursor
        statuses = [m.status for m in await store.list_messages(chat.id)]
        assert statuses == [MessageStatus.COMPLETED] * 2 + [MessageStatus.ABORTED] * 2
        held.set()
        again = TurnInput(provider=provider, model=model, system_prompt="s",
                          user_text="again")
        assert (await consume(engine, chat.id, again))[-1] == "turn_completed"
