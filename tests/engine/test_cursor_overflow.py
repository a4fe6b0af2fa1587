"""A cursor chat whose provider-side conversation outgrows the model's window, against
the emulators over loopback (Gemini Interactions, which never compacts; OpenAI Responses
with compaction off). The turn the provider refuses degrades in place (``cursor`` →
``replay`` on ``context_overflow``), replays a trimmed history, stores a fresh cursor,
and the next turns continue by cursor; nothing stored is lost. Before the fix the
refused turn aborted with the old cursor kept and every later turn failed the same way.

The emulators' windows are set below the registry's so that the snapshot never reaches
``critical`` before the refusal (the reactive path, deterministically); the proactive
path has its own test, with the snapshot made critical by one large turn."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import attrs
import pytest

from tests.engine.support import collect
from turnstate.core._context import ContextSettings
from turnstate.core._events import TurnAborted, TurnCompleted
from turnstate.core._registry import DEFAULT_REGISTRY, ModelInfo
from turnstate.emulators import EmulatedProviders
from turnstate.engine import TurnEngine, TurnInput
from turnstate.providers._transport import AiohttpTransport
from turnstate.storage import MemoryStore

LIMIT = 8_000
GEMINI = ModelInfo(provider="gemini", name="demo-small-window", context_limit=LIMIT)
OPENAI = ModelInfo(provider="openai", name="demo-small-window", context_limit=LIMIT)
REGISTRY = DEFAULT_REGISTRY.with_model(GEMINI).with_model(OPENAI)
CURSOR_FIELD = {"gemini": "previous_interaction_id", "openai": "previous_response_id"}
NO_COMPACTION = ContextSettings(provider_compaction_enabled=False)


@attrs.define
class Chat:
    providers: EmulatedProviders
    engine: TurnEngine
    store: MemoryStore
    chat_id: str
    provider: str

    @property
    def emulator(self) -> Any:
        return self.providers.emulators[self.provider]

    async def turn(self, text: str) -> TurnCompleted | TurnAborted:
        turn = TurnInput(provider=self.provider, model="demo-small-window",
                         system_prompt="You are terse.", user_text=text, context=NO_COMPACTION)
        final = (await collect(self.engine.run_turn(self.chat_id, turn))).events[-1]
        assert isinstance(final, TurnCompleted | TurnAborted)
        return final

    def bodies(self) -> list[dict[str, Any]]:
        return [json.loads(r.body) for r in self.emulator.requests]


@pytest.fixture
async def chat(request: pytest.FixtureRequest) -> AsyncIterator[Chat]:
    provider, window = request.param
    async with EmulatedProviders([provider]) as providers, AiohttpTransport() as transport:
        providers.emulators[provider].context_windows["demo-small-window"] = window  # type: ignore[attr-defined]
        store = MemoryStore()
        engine = TurnEngine(store, providers.adapters, transport, registry=REGISTRY)
        created = await store.create_chat(owner="alice")
        yield Chat(providers, engine, store, created.id, provider)


def _filler(number: int) -> str:
    return f"turn {number}: " + "lorem ipsum dolor sit amet " * 80  # about 550 tokens


@pytest.mark.parametrize("chat", [("gemini", 7_000), ("openai", 7_000)], indirect=True,
                         ids=["gemini", "openai-no-compaction"])
async def test_a_cursor_chat_past_the_window_continues(chat: Chat) -> None:
    turns = 40
    finals = []
    for number in range(turns):
        final = await chat.turn(_filler(number))
        assert isinstance(final, TurnCompleted), (number, final)
        finals.append(final)
    overflowed = [n for n, f in enumerate(finals) if f.degradation == "context_overflow"]
    assert len(overflowed) >= 2, [f.strategy for f in finals]  # the chat outgrew it again
    for n in overflowed:
        steps = [(s.source, s.trigger, s.dest) for s in finals[n].path]
        assert ("cursor", "context_overflow", "replay") in steps
        assert finals[n].strategy == "replay"
        if n + 1 < turns:  # the last turn may be one too
            assert finals[n + 1].strategy == "cursor"  # a fresh cursor, which fits
            assert finals[n + 1].degradation is None
    # The refused cursor request, then the trimmed replay without a cursor; the next
    # turn continues the replay's response.
    bodies = chat.bodies()
    field = CURSOR_FIELD[chat.provider]
    refused = [i for i, b in enumerate(bodies) if field not in b or b[field] is None]
    assert len(refused) == 1 + len(overflowed)  # the first turn, and each degraded replay
    # Nothing stored is lost: every message of every turn is in the history.
    history = await chat.store.load_history(chat.chat_id)
    assert len(history) == 2 * turns
    assert [m.status for m in history] == ["completed"] * (2 * turns)
    assert history[0].parts[0].text.startswith("turn 0: ")  # type: ignore[union-attr]
    # The audit names the cut of each degraded replay.
    audits = [m.provider_state for m in history if m.role == "assistant"]
    trimmed = [n for n, a in enumerate(audits) if "contextTrimmed" in (a or "")]
    assert trimmed == overflowed


@pytest.mark.parametrize("chat", [("gemini", LIMIT)], indirect=True, ids=["gemini"])
async def test_a_critical_snapshot_replays_before_sending(chat: Chat) -> None:
    """The last snapshot (provider-reported) is critical: the next turn decides a
    trimmed replay at ``validate``, and sends exactly one request, without a cursor."""
    first = await chat.turn("big: " + "x" * 31_000)
    assert isinstance(first, TurnCompleted)
    row = await chat.store.load_chat(chat.chat_id)
    snapshot = json.loads(row.last_context_state or "{}")
    assert snapshot["severity"] == "critical" and snapshot["source"] == "provider"
    sent = len(chat.emulator.requests)
    second = await chat.turn("small follow-up")
    assert isinstance(second, TurnCompleted), second
    assert second.degradation == "context_overflow" and second.strategy == "replay"
    first_step = second.path[0]
    assert (first_step.source, first_step.trigger, first_step.dest) == (
        "validate", "context_overflow", "replay")
    assert len(chat.emulator.requests) == sent + 1
    assert CURSOR_FIELD["gemini"] not in chat.bodies()[-1]
    third = await chat.turn("another")
    assert isinstance(third, TurnCompleted) and third.strategy == "cursor"
    assert len(await chat.store.load_history(chat.chat_id)) == 6
