"""Several nodes on one database: a turn reads the chat only once it holds the lease.

Another node can commit a turn between this node's read of the chat and its begin. An
engine deciding from a chat read before its begin holds a cursor that no longer covers
the committed history: it degrades (``cursor_invalid``) and replays for nothing. (Seen
failing so before the engine moved its read after the begin.)
"""

from __future__ import annotations

from typing import Any

from tests.engine.support import FakeClock, collect, make_turn
from turnstate.core import parse_envelope
from turnstate.emulators._base import items_from_messages
from turnstate.emulators._emulated import EmulatedProviders
from turnstate.engine import TurnEngine
from turnstate.providers._transport import AiohttpTransport
from turnstate.storage import MemoryStore, TurnLease, TurnStart


class _OtherNodeCommitsFirst(MemoryStore):
    """A store where, once, another node's whole turn lands just before a begin."""

    def __init__(self, clock: FakeClock) -> None:
        super().__init__(clock=clock)
        self.other_node: TurnEngine | None = None

    async def begin_turn(self, chat_id: str, start: TurnStart, *,
                         owner: str | None = None) -> TurnLease:
        other, self.other_node = self.other_node, None
        if other is not None:
            await collect(other.run_turn(chat_id, make_turn("from the other node")))
        return await super().begin_turn(chat_id, start, owner=owner)


async def test_turn_decides_from_the_chat_it_holds() -> None:
    """A commit by another node just before our begin is in the cursor we continue from:
    the turn stays on the cursor, and invariant 2 holds after it."""
    clock = FakeClock()
    store = _OtherNodeCommitsFirst(clock)
    async with EmulatedProviders(["openai"]) as stack, AiohttpTransport() as transport:
        engine = TurnEngine(store, stack.adapters, transport, clock=clock)
        other = TurnEngine(store, stack.adapters, transport, clock=clock)
        chat = await store.create_chat(owner="alice")
        first = await collect(engine.run_turn(chat.id, make_turn("first")))
        assert first.committed
        store.other_node = other
        second = await collect(engine.run_turn(chat.id, make_turn("second")))
        assert second.committed and second.final.strategy == "cursor"
        raw = (await store.load_chat(chat.id)).last_provider_state
        assert raw is not None
        envelope = parse_envelope(raw)
        emulator: Any = stack.emulators["openai"]
        history = await store.load_history(chat.id)
        assert len(history) == 6
        assert emulator.conversation_for(envelope.cursor) == items_from_messages(history)
