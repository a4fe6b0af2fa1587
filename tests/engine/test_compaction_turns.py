"""Whole turns around an Anthropic compaction, against the emulators over loopback: a
tool loop that compacts (with thinking) continues from the block, and a switch of
provider or model after a compaction replays the full history without it."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import attrs
import pytest

from tests.engine.support import collect
from turnstate.core._conversation import OpaquePart, Role, Tool, ToolSpec
from turnstate.core._events import TurnCompleted
from turnstate.core._registry import DEFAULT_REGISTRY, ModelInfo
from turnstate.emulators import EmulatedProviders
from turnstate.engine import TurnEngine, TurnInput
from turnstate.providers._transport import AiohttpTransport
from turnstate.storage import MemoryStore

MODEL = ModelInfo(provider="anthropic", name="demo-compacting", context_limit=64_000,
                  compaction=True, thinking=True)
REGISTRY = DEFAULT_REGISTRY.with_model(MODEL)
PASTE = "Notes of the trip: " + "walked the old town, took the tram to the river. " * 4_300


async def _weather(args: dict[str, Any]) -> Any:
    return {"city": args.get("city"), "forecast": "sunny"}


WEATHER = Tool(spec=ToolSpec(name="weather", description="Weather of a city", parameters={
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}),
    handler=_weather)


@attrs.define
class Rig:
    providers: EmulatedProviders
    engine: TurnEngine
    store: MemoryStore
    chat_id: str

    async def turn(self, text: str, provider: str = "anthropic",
                   model: str = MODEL.name) -> TurnCompleted:
        turn = TurnInput(provider=provider, model=model, system_prompt="Be brief.",
                         user_text=text, tools=(WEATHER,))
        final = (await collect(self.engine.run_turn(self.chat_id, turn))).events[-1]
        assert isinstance(final, TurnCompleted), final
        return final

    def bodies(self, provider: str) -> list[Any]:
        return [json.loads(r.body) for r in self.providers.emulators[provider].requests]


@pytest.fixture
async def rig() -> AsyncIterator[Rig]:
    options = {"anthropic": {"thinking_budget_tokens": 1024}}
    async with EmulatedProviders(["anthropic", "openai"], adapter_options=options) as providers, \
            AiohttpTransport() as transport:
        store = MemoryStore()
        engine = TurnEngine(store, providers.adapters, transport, registry=REGISTRY)
        chat = await store.create_chat(owner="alice")
        yield Rig(providers, engine, store, chat.id)


async def test_a_tool_loop_that_compacts_continues_from_the_block(rig: Rig) -> None:
    """The answer starts with the compaction block, then thinking and a call; the loop's
    next request starts at the block and keeps the thinking the API wants."""
    await rig.turn('[[think]] [[call:weather {"city": "Lyon"}]] ' + PASTE)
    first, second = rig.bodies("anthropic")
    assert len(json.dumps(first)) > 200_000
    assert second["messages"][0]["role"] == "assistant"
    kinds = [block["type"] for block in second["messages"][0]["content"]]
    assert kinds == ["compaction", "thinking", "tool_use"]
    assert len(json.dumps(second)) < 5_000
    history = await rig.store.load_history(rig.chat_id)
    assert [p.kind for p in history[-1].parts if isinstance(p, OpaquePart)] == ["compaction"]
    # The next turn starts at the stored block too.
    await rig.turn("And tomorrow?")
    third = rig.bodies("anthropic")[-1]
    assert third["messages"][0]["content"][0]["type"] == "compaction"
    assert len(json.dumps(third)) < 5_000


@pytest.mark.parametrize(("provider", "model"), [("openai", "gpt-4o"),
                                                 ("anthropic", "claude-sonnet-4-5")])
async def test_a_switch_after_a_compaction_replays_the_full_history(
    rig: Rig, provider: str, model: str,
) -> None:
    await rig.turn(PASTE)
    await rig.turn(PASTE[:200], provider=provider, model=model)
    sent = rig.bodies(provider)[-1]
    entries = sent["input"] if provider == "openai" else [
        block for message in sent["messages"] for block in message["content"]]
    assert all(entry.get("type") != "compaction" for entry in entries)
    assert json.dumps(sent).count(PASTE[:200]) >= 2  # the paste replayed, then repeated
    history = await rig.store.load_history(rig.chat_id)
    assert history[0].role == Role.USER and len(history) == 4
