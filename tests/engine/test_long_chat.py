"""Long chats that never overflow: 300 turns on one chat with a small-context model,
on Anthropic (server-side compaction, every turn a local loop) and on OpenAI (cursor
turns, the cursor expired every 50 turns), against the emulators over loopback.

No turn may fail on the context window, and from the first compaction on each request's
bytes stay bounded instead of growing with the history. With compaction off, the same
Anthropic chat overflows (the test's own control)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import attrs
import pytest

from tests.engine.support import collect
from turnstate.core._context import ContextSettings, estimate_tokens, part_chars
from turnstate.core._conversation import OpaquePart
from turnstate.core._events import TurnAborted, TurnCompleted
from turnstate.core._registry import DEFAULT_REGISTRY, ModelInfo
from turnstate.emulators import EmulatedProviders
from turnstate.engine import TurnEngine, TurnInput
from turnstate.providers._transport import AiohttpTransport
from turnstate.storage import MemoryStore

TURNS = 300
ANTHROPIC_MODEL = ModelInfo(provider="anthropic", name="demo-small-compacting",
                            context_limit=64_000, compaction=True)
OPENAI_MODEL = ModelInfo(provider="openai", name="demo-small-compacting", context_limit=8_000)
REGISTRY = DEFAULT_REGISTRY.with_model(ANTHROPIC_MODEL).with_model(OPENAI_MODEL)


@attrs.define
class Chat:
    """One chat on one provider, with what each turn sent."""

    providers: EmulatedProviders
    engine: TurnEngine
    store: MemoryStore
    chat_id: str
    provider: str
    model: ModelInfo
    sent: list[int] = attrs.field(factory=list)
    strategies: list[str] = attrs.field(factory=list)

    async def turn(self, number: int, size: int, *, compaction: bool = True) -> Any:
        filler = f"turn {number}: " + "lorem ipsum dolor sit amet " * (size // 27)
        turn = TurnInput(provider=self.provider, model=self.model.name,
                         system_prompt="You are terse.", user_text=filler,
                         context=ContextSettings(provider_compaction_enabled=compaction))
        outcome = await collect(self.engine.run_turn(self.chat_id, turn))
        final = outcome.events[-1]
        if isinstance(final, TurnCompleted):
            self.sent.append(final.stats.request_bytes)
            self.strategies.append(final.strategy)
        return final

    async def compacted_turns(self) -> list[int]:
        """The numbers (0-based) of the turns whose answer holds a compaction."""
        history = await self.store.load_history(self.chat_id)
        answers = [m for m in history if m.role == "assistant"]
        return [n for n, m in enumerate(answers)
                if any(isinstance(p, OpaquePart) and p.kind == "compaction" for p in m.parts)]


@pytest.fixture
async def chat_on(request: pytest.FixtureRequest) -> AsyncIterator[Chat]:
    provider, model = request.param
    async with EmulatedProviders([provider]) as providers, AiohttpTransport() as transport:
        emulator: Any = providers.emulators[provider]
        emulator.context_windows[model.name] = model.context_limit
        store = MemoryStore()
        engine = TurnEngine(store, providers.adapters, transport, registry=REGISTRY)
        chat = await store.create_chat(owner="alice")
        yield Chat(providers=providers, engine=engine, store=store, chat_id=chat.id,
                   provider=provider, model=model)


def _bounded_from_first_compaction(chat: Chat, first: int) -> None:
    """Every request from the first compaction on is no bigger than the one that
    compacted, and the chat's last requests are far below it."""
    peak = max(chat.sent[: first + 1])
    assert max(chat.sent[first:]) <= peak
    assert max(chat.sent[-20:]) < peak


@pytest.mark.parametrize("chat_on", [("anthropic", ANTHROPIC_MODEL)], indirect=True)
async def test_anthropic_300_turns_compact_and_never_overflow(chat_on: Chat) -> None:
    chat = chat_on
    for number in range(TURNS):
        final = await chat.turn(number, 1_600)
        assert isinstance(final, TurnCompleted), (number, final)
    compacted = await chat.compacted_turns()
    assert len(compacted) >= 2  # compaction keeps happening, every ~100 turns
    _bounded_from_first_compaction(chat, compacted[0])
    # The history is all still there: only the requests shrank.
    history = await chat.store.load_history(chat.chat_id)
    assert len(history) == 2 * TURNS
    assert estimate_tokens(chars=sum(part_chars(m.parts) for m in history)) > 2 * 64_000
    # The snapshot shows the compacted context the provider reported.
    row = await chat.store.load_chat(chat.chat_id)
    assert row.last_context_state is not None
    snapshot = json.loads(row.last_context_state)
    assert snapshot["source"] == "provider"
    assert snapshot["estimatedInputTokens"] < 51_200  # below the trigger: compacted


@pytest.mark.parametrize("chat_on", [("anthropic", ANTHROPIC_MODEL)], indirect=True)
async def test_without_compaction_the_same_chat_overflows(chat_on: Chat) -> None:
    """The control: compaction off (and the default overflow policy, ``abort``), the
    chat fails on the context window: the provider's refusal ("prompt is too long: N
    tokens > M maximum") is the typed ``context_overflow`` naming its figures."""
    chat = chat_on
    for number in range(TURNS):
        final = await chat.turn(number, 1_600, compaction=False)
        if isinstance(final, TurnAborted):
            assert final.reason == "context_overflow"
            assert "prompt is too long" in (final.detail or "")
            assert final.failure is not None
            assert final.failure.error_type == "context_length_exceeded"
            assert number < TURNS
            return
    pytest.fail("a chat without compaction never overflowed")


@pytest.mark.parametrize("chat_on", [("openai", OPENAI_MODEL)], indirect=True)
async def test_openai_300_turns_with_the_cursor_expired_every_50(chat_on: Chat) -> None:
    chat = chat_on
    emulator: Any = chat.providers.emulators["openai"]
    replays: list[int] = []
    for number in range(TURNS):
        if number and number % 50 == 0:
            emulator.evict_all()
            history = await chat.store.load_history(chat.chat_id)
            full = estimate_tokens(chars=sum(part_chars(m.parts) for m in history))
            assert full > OPENAI_MODEL.context_limit  # a full replay could not fit
            replays.append(number)
        final = await chat.turn(number, 600)
        assert isinstance(final, TurnCompleted), (number, final)
    assert [chat.strategies[n] for n in replays] == ["replay"] * 5
    compacted = await chat.compacted_turns()
    assert compacted and compacted[0] < 50
    # Each replay starts at the latest compaction item and stays small.
    bodies = [json.loads(r.body) for r in emulator.requests if "previous_response_id"
              not in json.loads(r.body)]
    replay_bodies = bodies[1:]  # the chat's first request had no cursor either
    assert len(replay_bodies) == 5
    assert all(body["input"][0]["type"] == "compaction" for body in replay_bodies)
    assert max(chat.sent[n] for n in replays) < 4 * OPENAI_MODEL.context_limit
