"""Claude answers whitespace (``"\\n\\n"`` before a call, or as the whole answer): the tool
loop goes on and so does the chat (the emulator refuses a whitespace-only text block as
the API does: "messages: text content blocks must contain non-whitespace text").

Before the Anthropic codec dropped such text, the loop's next request and every later
request of the chat carried it back and failed with that 400.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.engine.support import Outcome, collect, make_turn
from turnstate.core._events import TurnCompleted
from turnstate.emulators import AnthropicEmulator, EmulatedProviders, Reply, ScriptedCall
from turnstate.engine import TurnEngine
from turnstate.providers._transport import AiohttpTransport, RetryPolicy
from turnstate.storage import MemoryStore

OSLO = ScriptedCall(name="weather", arguments='{"city": "Oslo"}')


@pytest.fixture
async def rig() -> AsyncIterator[tuple[AnthropicEmulator, TurnEngine, str]]:
    async with EmulatedProviders(("anthropic",)) as stack, \
            AiohttpTransport(retry=RetryPolicy(max_attempts=1)) as transport:
        store = MemoryStore()
        chat = await store.create_chat(owner="o")
        yield stack.emulators["anthropic"], TurnEngine(store, stack.adapters, transport), chat.id


async def turn(engine: TurnEngine, chat_id: str, text: str) -> TurnCompleted:
    outcome: Outcome = await collect(engine.run_turn(chat_id, make_turn(
        text, provider="anthropic", model="claude-sonnet-4-5")))
    assert isinstance(outcome.final, TurnCompleted), outcome.final
    return outcome.final


async def test_whitespace_answers_keep_the_loop_and_the_chat_going(
        rig: tuple[AnthropicEmulator, TurnEngine, str]) -> None:
    emulator, engine, chat_id = rig
    emulator.model.push(Reply(text="\n\n", calls=(OSLO,)))
    emulator.model.push(Reply(text="Oslo: 4C."))
    assert (await turn(engine, chat_id, "weather in Oslo?")).text == "Oslo: 4C."
    emulator.model.push(Reply(text="\n\n"))
    await turn(engine, chat_id, "and now?")
    emulator.model.push(Reply(text="Still 4C."))
    assert (await turn(engine, chat_id, "again?")).text == "Still 4C."
    assert len(emulator.requests) == 4
