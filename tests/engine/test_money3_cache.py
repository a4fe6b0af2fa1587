"""Prompt caching over long chats, measured on the emulators' caches (money3).

Anthropic looks back only about 20 blocks from a breakpoint for an earlier cache entry,
and drops a finished turn's thinking blocks, so the entries a thinking tool loop wrote
match nothing in the next turn. Before, that next turn found no entry but the system
prompt's and wrote the whole chat again at 1.25x the input rate: its write grew with the
chat. The previous question's breakpoint (``providers/anthropic/_cache.py``) is read
instead, and the write is the loop alone, the same at every such turn.
"""

from __future__ import annotations

from typing import Any

from turnstate.core import ContextSettings, TurnCompleted
from turnstate.core._conversation import Tool, ToolSpec, Usage
from turnstate.core._registry import DEFAULT_REGISTRY, ModelInfo
from turnstate.emulators import EmulatedProviders
from turnstate.engine import TurnEngine, TurnInput
from turnstate.providers._transport import AiohttpTransport
from turnstate.storage import MemoryStore

SYSTEM = "".join(f"Rule {n}: answer plainly, cite the tool you used. " for n in range(120))


async def _forecast(args: dict[str, Any]) -> Any:
    return {"city": args.get("city"), "forecast": "mild, light wind, 18 C " * 20}


TOOLS = (Tool(spec=ToolSpec(name="weather", description="The weather service.",
                            parameters={"type": "object",
                                        "properties": {"city": {"type": "string"}}}),
              handler=_forecast),)


def question(turn: int) -> str:
    text = f"[[think]] Turn {turn}: " + "the plan in detail " * 30
    return f"[[call:weather*2]] [[rounds:6]] {text}" if turn % 4 == 0 else text


async def anthropic_chat(turns: int) -> list[Usage]:
    options = {"anthropic": {"thinking_budget_tokens": 2048}}
    async with EmulatedProviders(["anthropic"], options) as stack, \
            AiohttpTransport() as transport:
        store = MemoryStore()
        engine = TurnEngine(store, stack.adapters, transport)
        chat = await store.create_chat(owner="alice")
        usages = []
        for turn in range(1, turns + 1):
            final = None
            async for event in engine.run_turn(chat.id, TurnInput(
                    provider="anthropic", model="claude-sonnet-4-5", system_prompt=SYSTEM,
                    user_text=question(turn), tools=TOOLS,
                    context=ContextSettings(provider_compaction_enabled=False))):
                final = event
            assert isinstance(final, TurnCompleted), final
            usages.append(final.stats.usage)
        return usages


async def test_the_turn_after_a_long_thinking_tool_loop_reads_the_chat_from_the_cache(
) -> None:
    usages = await anthropic_chat(9)
    inputs = [u.input_tokens for u in usages]
    cached = [u.cached_input_tokens for u in usages]
    writes = [u.cache_write_tokens for u in usages]
    # Turns 5 and 9 follow a six-round loop: each reads everything up to the loop's
    # question and writes the loop (its thinking dropped) and the new question.
    assert cached[4] >= inputs[2] and cached[8] >= inputs[6]
    assert writes[8] == writes[4] < inputs[4] - inputs[2]
    # Before: turn 5 read the system prompt alone (1,679 of 5,324 tokens) and wrote
    # 3,479; turn 9 wrote 6,959, the whole chat again.


async def test_a_new_chat_reads_the_system_prompt_another_chat_wrote() -> None:
    """Anthropic's cache is shared by the workspace's requests: a second chat's first
    turn reads the tools and system prompt the first chat's requests wrote (before: it
    carried no breakpoint and paid its 1,523 input tokens at the input rate, $0.004749;
    now it reads 1,511 of them from the cache, $0.000717)."""
    async with EmulatedProviders(["anthropic"]) as stack, AiohttpTransport() as transport:
        store = MemoryStore()
        engine = TurnEngine(store, stack.adapters, transport)
        usages = []
        for chat_turns in (2, 1):
            chat = await store.create_chat(owner="alice")
            for turn in range(chat_turns):
                final = None
                async for event in engine.run_turn(chat.id, TurnInput(
                        provider="anthropic", model="claude-sonnet-4-5",
                        system_prompt=SYSTEM, user_text=f"question {turn}", tools=TOOLS)):
                    final = event
                assert isinstance(final, TurnCompleted), final
                usages.append(final.stats)
    first_chat_first_turn, _, second_chat_first_turn = usages
    assert first_chat_first_turn.usage.cached_input_tokens == 0  # cold: nothing to read
    assert first_chat_first_turn.usage.cache_write_tokens == 0  # and nothing written
    read = second_chat_first_turn.usage
    assert read.cached_input_tokens > 0.9 * read.input_tokens and read.cache_write_tokens == 0
    assert first_chat_first_turn.cost is not None and second_chat_first_turn.cost is not None
    assert second_chat_first_turn.cost.total < first_chat_first_turn.cost.total / 3


async def test_a_tool_loop_that_compacted_keeps_caching_its_iterations() -> None:
    """Once a request of the loop compacted, the next ones start at the compaction block
    (the API drops what precedes it); they carried no breakpoint at all, so each paid the
    compacted context and the loop again at the input rate. The newest tool results are
    marked there too now, so the loop's next request reads what this one wrote. (The
    scripted model sees only the summary after the compaction, so it answers at once.)"""
    model = ModelInfo(provider="anthropic", name="demo-compacting", context_limit=64_000,
                      compaction=True, min_cache_tokens=100)
    paste = "Notes of the trip: " + "walked the old town, took the tram to the river. " * 4_300
    async with EmulatedProviders(["anthropic"]) as stack, AiohttpTransport() as transport:
        store = MemoryStore()
        engine = TurnEngine(store, stack.adapters, transport,
                            registry=DEFAULT_REGISTRY.with_model(model))
        chat = await store.create_chat(owner="alice")
        final = None
        async for event in engine.run_turn(chat.id, TurnInput(
                provider="anthropic", model=model.name, system_prompt=SYSTEM,
                user_text="[[call:weather*2]] " + paste, tools=TOOLS)):
            final = event
        assert isinstance(final, TurnCompleted), final
        bodies = [r.json for r in stack.emulators["anthropic"].requests]
    assert len(bodies) == 2
    assert bodies[1]["messages"][0]["content"][0]["type"] == "compaction"
    assert "cache_control" in bodies[1]["messages"][-1]["content"][-1]  # before: none
    assert final.stats.usage.cache_write_tokens > 0  # before: 0
