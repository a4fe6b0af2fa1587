"""An answer's citations through the engine (wire6): on ``turn_completed`` and the stored
answer, rebuilt from the store the same, and never sent back: a cursor turn, a replay to
the same provider and one to another all pass the emulators' request checks with text
only."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.engine.support import collect, make_turn
from turnstate.core import TextPart
from turnstate.core._citations import Citation
from turnstate.core._events import TurnCompleted
from turnstate.emulators import EmulatedProviders
from turnstate.engine import TurnEngine
from turnstate.engine._follow import synthesized_final
from turnstate.providers._transport import AiohttpTransport, RetryPolicy
from turnstate.storage import MemoryStore


@pytest.fixture
async def stack() -> AsyncIterator[tuple[EmulatedProviders, TurnEngine, MemoryStore]]:
    async with EmulatedProviders() as emulated, \
            AiohttpTransport(retry=RetryPolicy(max_attempts=1)) as transport:
        store = MemoryStore()
        yield emulated, TurnEngine(store, emulated.adapters, transport), store


ASK = "[[cite:https://example.com/a]] [[cite:https://example.com/b]] Where is it?"


async def test_an_answers_citations_are_on_its_final_event_and_stored(
        stack: tuple[EmulatedProviders, TurnEngine, MemoryStore]) -> None:
    emulated, engine, store = stack
    chat = await store.create_chat(owner="o")
    final = (await collect(engine.run_turn(chat.id, make_turn(ASK, turn_id="t1")))).final
    assert isinstance(final, TurnCompleted)
    end = len(final.text)
    assert final.citations == (
        Citation(kind="url_citation", url="https://example.com/a", title="Source 1", start=0,
                 end=end),
        Citation(kind="url_citation", url="https://example.com/b", title="Source 2", start=0,
                 end=end))
    answer = (await store.list_messages(chat.id))[-1]
    assert [p for p in answer.parts if isinstance(p, TextPart)] == [
        TextPart(text=final.text, citations=final.citations)]
    rebuilt = await synthesized_final(store, chat.id, "t1")
    assert isinstance(rebuilt, TurnCompleted) and rebuilt.citations == final.citations

    # continued by its cursor, replayed (a new system prompt), then on another provider
    for turn in (make_turn("And then?"), make_turn("Again?", prompt="Be kind."),
                 make_turn("Elsewhere?", provider="anthropic", model="claude-sonnet-4-5")):
        after = (await collect(engine.run_turn(chat.id, turn))).final
        assert isinstance(after, TurnCompleted), after
        assert after.citations == ()
    replayed = [r.body for name in ("openai", "anthropic")
                for r in emulated.emulators[name].requests]
    assert len(replayed) == 4
    for body in replayed[1:]:  # the question names the URLs, the answers' sources do not
        assert all(key not in body for key in (b"url_citation", b"annotations", b"citations"))
