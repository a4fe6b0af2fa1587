"""A turn lets its question's decoded image go once the request carrying it is built, and
reads it back from the store for a later request of the turn (embed7).

The engine held the turn's ``TurnInput`` (its decoded images and files) from the begin,
which stores them with the question, to the commit: while the provider answered, a
detached turn held the image and the request body (2.4x the image, memory7), although the
body alone is what a retry sends. Now the run keeps the question's media apart
(``engine._user_media.UserMedia``): dropped once the request is built, read back with
``Store.load_media_part`` only for a request that sends the question again (every
request of a local loop, a replay after a lost cursor); a cursor's tool continuation
sends only the results and reads nothing. Measured with tracemalloc at the moment the
emulator takes the request, as ``tests/server/test_memory7_large_image.py`` does, on a
detached turn whose caller keeps no ``TurnInput`` (``start_turn`` of one built inline).
"""

from __future__ import annotations

import base64
import tracemalloc
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from turnstate import (
    AiohttpTransport,
    ContextSettings,
    ImagePart,
    SqliteStore,
    TextPart,
    Tool,
    ToolSpec,
    TurnEngine,
    TurnInput,
)
from turnstate.emulators import EmulatedProviders, Fault
from turnstate.testing import emulated_providers

__all__ = ["emulated_providers"]  # the fixture

SIZE = 4 * 1024 * 1024
PNG = b"\x89PNG\r\n\x1a\n" + bytes(SIZE - 8)
MODELS = {"openai": "gpt-4o", "gemini": "gemini-2.5-flash", "anthropic": "claude-sonnet-4-5",
          "openai-compatible": "gpt-4o", "deepseek": "deepseek-chat"}


async def clock(_: dict[str, Any]) -> str:
    return "noon"


TOOLS = (Tool(spec=ToolSpec(name="clock", parameters={"type": "object", "properties": {}}),
              handler=clock),)


@pytest.fixture
async def engine(emulated_providers: EmulatedProviders,
                 tmp_path: Path) -> AsyncIterator[TurnEngine]:
    async with AiohttpTransport() as transport, \
            SqliteStore.open(str(tmp_path / "chats.sqlite")) as store, \
            TurnEngine(store, emulated_providers.adapters, transport) as engine:
        yield engine


def fresh() -> bytes:
    """The image as new bytes (decoded from a request, as a server's are): allocated while
    tracemalloc traces, unlike ``PNG``."""
    return PNG[:8] + PNG[8:]


async def run(engine: TurnEngine, chat_id: str, provider: str, text: str) -> str:
    """A detached turn with the image, its ``TurnInput`` built inline (the caller keeps
    none, as the reference server's route and ``examples/sse_backend.py``); its last
    event's type."""
    live = await engine.start_turn(chat_id, TurnInput(
        provider=provider, model=MODELS[provider], system_prompt="", tools=TOOLS,
        content=(TextPart(text=text), ImagePart(media_type="image/png", data=fresh()))))
    following = await engine.follow(chat_id, live.turn_id)
    last = ""
    async for event in following.events:
        last = event.type
    return last


@pytest.mark.parametrize("provider", ["openai", "gemini", "anthropic", "openai-compatible"])
async def test_the_image_is_let_go_while_the_provider_answers(
        engine: TurnEngine, emulated_providers: EmulatedProviders,
        provider: str, monkeypatch: pytest.MonkeyPatch) -> None:
    chat = await engine.store.create_chat(owner="o")
    emulator = emulated_providers.emulators[provider]
    record, seen = emulator.record, []

    async def recording(request: Any) -> Any:
        seen.append(tracemalloc.get_traced_memory()[0])
        return await record(request)

    monkeypatch.setattr(emulator, "record", recording)
    tracemalloc.start()
    try:
        last = await run(engine, chat.id, provider, "look")
    finally:
        tracemalloc.stop()
    assert last == "turn_completed"
    held = seen[0]
    # the request body (1.33x) and the transport's; was 2.4x with the decoded image
    assert held < 1.8 * SIZE, f"held {held / SIZE:.2f}x the image"
    assert base64.b64encode(PNG) in emulator.requests[-1].body


@pytest.mark.parametrize("provider", ["anthropic", "openai-compatible", "openai"])
async def test_a_later_request_of_the_turn_sends_the_image_read_back(
        engine: TurnEngine, emulated_providers: EmulatedProviders,
        provider: str, monkeypatch: pytest.MonkeyPatch) -> None:
    chat = await engine.store.create_chat(owner="o")
    reads: list[tuple[int, int]] = []
    load = engine.store.load_media_part

    async def counted(chat_id: str, seq: int, index: int, *, owner: str | None = None
                      ) -> Any:
        reads.append((seq, index))
        return await load(chat_id, seq, index, owner=owner)

    monkeypatch.setattr(engine.store, "load_media_part", counted)
    emulator = emulated_providers.emulators[provider]
    assert await run(engine, chat.id, provider, "[[call:clock]] what time?") == \
        "turn_completed"
    bodies = [r.body for r in emulator.requests]
    assert len(bodies) == 2
    encoded = base64.b64encode(PNG)
    assert encoded in bodies[0]
    if provider == "openai":  # the tool continuation chains on the cursor: results only
        assert encoded not in bodies[1] and reads == []
    else:  # a local loop sends the question again: read back from the store, once
        assert encoded in bodies[1] and reads == [(1, 1)]


async def test_a_replay_after_a_lost_cursor_sends_the_image_read_back(
        engine: TurnEngine, emulated_providers: EmulatedProviders) -> None:
    chat = await engine.store.create_chat(owner="o")
    assert await run(engine, chat.id, "openai", "first") == "turn_completed"
    emulated_providers.chained("openai").evict_all()
    assert await run(engine, chat.id, "openai", "second") == "turn_completed"
    bodies = [r.body for r in emulated_providers.emulators["openai"].requests]
    assert len(bodies) == 3  # the first turn, the rejected cursor, the replay
    assert bodies[2].count(base64.b64encode(PNG)) == 2  # the history's and the question's


async def test_a_request_refused_as_too_long_is_trimmed_and_sent_with_the_image(
        engine: TurnEngine, emulated_providers: EmulatedProviders) -> None:
    """The refit after a ``context_refused`` refusal reads the question's media (the
    history's media budget counts them): let go, they are read back first, not an
    ``internal_error`` abort."""
    chat = await engine.store.create_chat(owner="o")
    for n in range(3):
        assert await run(engine, chat.id, "anthropic", f"question {n}") == "turn_completed"
    emulator = emulated_providers.emulators["anthropic"]
    emulator.faults.push(Fault(status=400, body={"type": "error", "error": {
        "type": "invalid_request_error",
        "message": "prompt is too long: 208310 tokens > 200000 maximum"}}))
    live = await engine.start_turn(chat.id, TurnInput(
        provider="anthropic", model=MODELS["anthropic"], system_prompt="",
        context=ContextSettings(overflow="trim"),
        content=(TextPart(text="last"), ImagePart(media_type="image/png", data=fresh()))))
    events = [event async for event in (await engine.follow(chat.id, live.turn_id)).events]
    assert events[-1].type == "turn_completed", events[-1].data
    assert base64.b64encode(PNG) in emulator.requests[-1].body
