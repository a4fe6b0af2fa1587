"""TurnEngine behaviour beyond the scenarios: event order, tools, machine reuse, errors."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.engine.support import Env, FakeClock, collect, make_turn, tool
from turnstate.core import ChatNotFound, ConfigurationError
from turnstate.emulators._scripted import ScriptedBackend, ScriptStep
from turnstate.engine import TurnEngine
from turnstate.states import _machine
from turnstate.storage import MemoryStore


async def test_documented_event_order(env: Env) -> None:
    """A degraded tool turn yields its events in the documented order."""
    await env.turn("one")
    env.backend.push("openai", ScriptStep.call(("weather", {"city": "a"}), ("time", {"city": "b"}),
                                               reasoning="hmm"),
                     ScriptStep.reply("two words", chunks=2))
    outcome = await env.turn("two", model="gpt-4.1")
    types = [e.type for e in outcome.events]
    assert types == [
        "continuation_degraded", "fallback_notice", "state_changed",   # validate → replay
        "reasoning_delta", "state_changed",                              # → tool_iteration
        "tool_call", "tool_call", "tool_result", "tool_result", "state_changed",  # → cursor
        "text_delta", "text_delta", "state_changed",                     # → persist
        "context_snapshot", "state_changed", "turn_completed",           # → done
    ]
    changes = [(e.source, e.dest) for e in outcome.of_type("state_changed")]
    assert changes == [("validate", "replay"), ("replay", "tool_iteration"),
                       ("tool_iteration", "cursor"), ("cursor", "persist"), ("persist", "done")]
    assert outcome.final.text == "two words"


async def test_tools_run_concurrently(env: Env) -> None:
    """Two tools that each wait for the other can only finish if they run at once."""
    arrived = {"a": asyncio.Event(), "b": asyncio.Event()}

    def waiting_for(me: str, other: str) -> Any:
        async def handler(_: dict[str, Any]) -> str:
            arrived[me].set()
            await arrived[other].wait()
            return me
        return handler

    tools = (tool("a", waiting_for("a", "b")), tool("b", waiting_for("b", "a")))
    env.backend.push("anthropic", ScriptStep.call(("a", {"city": "x"}), ("b", {"city": "y"})),
                     ScriptStep.reply("both"))
    outcome = await asyncio.wait_for(
        env.turn("go", provider="anthropic", model="claude-sonnet-4-5", tools=tools), 5)
    assert [r.output for r in outcome.of_type("tool_result")] == ["a", "b"]


async def test_no_machine_is_built_per_turn(monkeypatch: pytest.MonkeyPatch) -> None:
    """Over 100 turns the process builds exactly one machine."""
    built = []
    original = _machine.TurnMachine.__init__

    def counting(self: Any, *args: Any, **kwargs: Any) -> None:
        built.append(1)
        original(self, *args, **kwargs)

    monkeypatch.setattr(_machine.TurnMachine, "__init__", counting)
    _machine.shared_machine.cache_clear()
    try:
        clock = FakeClock()
        store = MemoryStore(clock=clock)
        backend = ScriptedBackend()
        engine = TurnEngine(store, backend.adapters(), backend, clock=clock)
        chat = await store.create_chat(owner="o")
        for index in range(100):
            outcome = await collect(engine.run_turn(chat.id, make_turn(f"turn {index}")))
            assert outcome.committed
        assert len(built) == 1
        assert engine.machine.models == []  # every turn left the machine
    finally:
        _machine.shared_machine.cache_clear()


async def test_unknown_chat_and_provider_are_typed_errors(env: Env) -> None:
    """An unknown chat is ChatNotFound; an unknown provider or a missing adapter is a
    ConfigurationError; nothing reaches a provider."""
    with pytest.raises(ChatNotFound):
        await collect(env.engine.run_turn("missing", make_turn()))
    with pytest.raises(ConfigurationError):
        await collect(env.engine.run_turn(env.chat_id, make_turn(provider="nope")))
    bare = TurnEngine(env.store, {}, env.backend, clock=env.clock)
    with pytest.raises(ConfigurationError):
        await collect(bare.run_turn(env.chat_id, make_turn()))
    assert env.backend.requests == []
    assert (await env.turn("still fine")).committed


async def test_audit_state_and_usage_are_committed(env: Env) -> None:
    """The assistant message carries the audit state and the turn's summed usage."""
    env.backend.push("openai", ScriptStep.call(("weather", {"city": "a"})), ScriptStep.reply("x"))
    outcome = await env.turn("audit me")
    history = await env.store.load_history(env.chat_id)
    assistant = history[-1]
    assert assistant.usage == outcome.final.stats.usage and assistant.usage.input_tokens > 0
    assert assistant.provider_state is not None and "stateless-loop" not in assistant.provider_state
    assert '"strategy":"replay"' in assistant.provider_state


async def test_context_snapshot_is_committed_and_emitted(env: Env) -> None:
    """The snapshot event equals what the chat row stores as last_context_state."""
    outcome = await env.turn("size")
    [event] = outcome.of_type("context_snapshot")
    assert event.snapshot.source == "provider" and event.snapshot.context_limit == 128_000
    chat = await env.store.load_chat(env.chat_id)
    assert chat.last_context_state is not None and '"severity":"normal"' in chat.last_context_state
