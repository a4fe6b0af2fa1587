"""A chat that compacted on OpenAI, moved to another provider for a while, then came
back: the replay starts at OpenAI's compaction item, and what followed it no longer fits
the window. With ``overflow="trim"`` the turn drops the oldest whole turns after the
compaction (keeping the summary), as it would without one; it used to end every later
OpenAI turn ``context_overflow`` (past a compaction point nothing was trimmed), so the
chat could never go back to OpenAI. Emulators over loopback."""

from __future__ import annotations

import json
from typing import Any

from tests.engine.support import collect
from turnstate.core._context import ContextSettings
from turnstate.core._conversation import OpaquePart
from turnstate.core._events import TurnCompleted
from turnstate.core._registry import DEFAULT_REGISTRY, ModelInfo
from turnstate.emulators import EmulatedProviders
from turnstate.engine import TurnEngine, TurnInput
from turnstate.providers._transport import AiohttpTransport
from turnstate.storage import MemoryStore

WINDOW, MODEL = 8_000, "demo-small-compacting"
REGISTRY = (DEFAULT_REGISTRY
            .with_model(ModelInfo(provider="openai", name=MODEL, context_limit=WINDOW))
            .with_model(ModelInfo(provider="openai-compatible", name=MODEL,
                                  context_limit=WINDOW)))


async def test_a_replay_past_a_compaction_trims_the_turns_after_it() -> None:
    async with EmulatedProviders(["openai", "openai-compatible"]) as stack, \
            AiohttpTransport() as transport:
        emulators: dict[str, Any] = dict(stack.emulators)
        for emulator in emulators.values():
            emulator.context_windows[MODEL] = WINDOW
        store = MemoryStore()
        engine = TurnEngine(store, stack.adapters, transport, registry=REGISTRY)
        chat = await store.create_chat(owner="alice")

        async def turn(provider: str, number: int) -> Any:
            text = f"turn {number}: " + "lorem ipsum dolor sit amet " * 150  # ~1,000 tokens
            events = await collect(engine.run_turn(chat.id, TurnInput(
                provider=provider, model=MODEL, system_prompt="You are terse.",
                user_text=text, context=ContextSettings(overflow="trim"))))
            return events.final

        number = 0
        while not any(isinstance(p, OpaquePart) and p.kind == "compaction"
                      for m in await store.load_history(chat.id) for p in m.parts):
            assert isinstance(await turn("openai", number), TurnCompleted)
            number += 1
            assert number < 20, "OpenAI never compacted"
        compacted = number
        for _ in range(10):  # ~10,000 tokens after the compaction, on another provider
            assert isinstance(await turn("openai-compatible", number), TurnCompleted)
            number += 1
        back = await turn("openai", number)
        assert isinstance(back, TurnCompleted), back
        assert back.strategy == "replay"
        body = json.loads(emulators["openai"].requests[-1].body)
        assert body["input"][0]["type"] == "compaction"  # the summary is still sent
        sent = json.dumps(body["input"])
        assert f"turn {compacted}:" not in sent  # the oldest turns after it went
        assert f"turn {number - 1}:" in sent and f"turn {number}:" in sent
        answer = (await store.load_history(chat.id))[-1]
        trim = json.loads(answer.provider_state or "{}")["metadata"]["contextTrimmed"]
        assert trim["estimatedTokens"] <= WINDOW and trim["droppedMessages"] >= 2
