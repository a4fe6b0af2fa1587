"""A cursor turn is O(1) in the history: it never reads it; a replay reads it once.

The store is wrapped to count history reads. A cursor turn (with tool iterations too)
reads none; a replay or local loop reads the history once per turn however many tool
iterations it runs; a cursor lost mid-turn costs exactly one read for the retry. The
context estimate, built from the chat's ``history_chars`` instead of the history,
equals the count over the history that an O(history) turn would make.
"""

from __future__ import annotations

import json
import math
from typing import Any

import attrs
import pytest

from tests.engine.support import Env, collect, make_turn
from turnstate.core._context import part_chars
from turnstate.core._conversation import Usage
from turnstate.emulators._scripted import ScriptedAdapter, ScriptedParser, ScriptStep
from turnstate.engine import TurnEngine
from turnstate.storage import MemoryStore


class CountingStore:
    """The env's store, counting the calls that read a chat's messages."""

    def __init__(self, store: Any) -> None:
        self.inner = store
        self.reads = 0

    async def load_history(self, chat_id: str) -> Any:
        self.reads += 1
        return await self.inner.load_history(chat_id)

    async def list_messages(self, chat_id: str) -> Any:
        self.reads += 1
        return await self.inner.list_messages(chat_id)

    async def load_messages(self, chat_id: str, **window: Any) -> Any:
        # what was committed since the engine's last read (``_histories``)
        self.reads += 1
        return await self.inner.load_messages(chat_id, **window)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def counting(env: Env, adapters: Any = None) -> tuple[CountingStore, TurnEngine]:
    store = CountingStore(env.store)
    engine = TurnEngine(store, adapters or env.backend.adapters(), env.backend,  # type: ignore[arg-type]
                        clock=env.clock)
    return store, engine


async def turn(engine: TurnEngine, env: Env, text: str, **kwargs: Any) -> Any:
    outcome = await collect(engine.run_turn(env.chat_id, make_turn(text, **kwargs)))
    assert outcome.committed, outcome.final
    return outcome


async def test_a_cursor_turn_reads_no_history(env: Env) -> None:
    """After the first (replay) turn, cursor turns with and without tools read nothing."""
    store, engine = counting(env)
    await turn(engine, env, "first")
    assert store.reads == 1
    env.backend.push("openai", ScriptStep.call(("weather", {"city": "a"})),
                     ScriptStep.call(("time", {"city": "b"})), ScriptStep.reply("done"))
    for text in ("second, with two tool iterations", "third", "fourth"):
        outcome = await turn(engine, env, text)
        assert outcome.final.strategy == "cursor"
    assert store.reads == 1


async def test_a_replay_reads_the_history_once_per_turn(env: Env) -> None:
    """A replay with two tool iterations, and a local loop with two, read it once each."""
    store, engine = counting(env)
    env.backend.push("openai", ScriptStep.call(("weather", {"city": "a"})),
                     ScriptStep.call(("time", {"city": "b"})), ScriptStep.reply("done"))
    await turn(engine, env, "replay with tools")
    assert store.reads == 1
    env.backend.push("anthropic", ScriptStep.call(("weather", {"city": "a"})),
                     ScriptStep.call(("time", {"city": "b"})), ScriptStep.reply("done"))
    outcome = await turn(engine, env, "local loop", provider="anthropic", model="claude-sonnet-4-5")
    assert outcome.final.strategy == "local_loop" and store.reads == 2


async def test_a_lost_cursor_costs_one_history_read(env: Env) -> None:
    """A cursor the provider rejects (no tool results in flight) retries as a replay,
    which reads the history once."""
    store, engine = counting(env)
    await turn(engine, env, "first")
    env.backend.expire_all()
    outcome = await turn(engine, env, "cursor gone")
    assert outcome.triggers[:2] == ["continue_with_cursor", "cursor_expired"]
    assert store.reads == 2


class _UnreportedParser:
    """A scripted parser whose provider reports no input tokens (so the turn estimates)."""

    def __init__(self, inner: ScriptedParser) -> None:
        self.inner = inner

    @property
    def done(self) -> bool:
        return self.inner.done

    def feed(self, event: Any) -> Any:
        return self.inner.feed(event)

    def finish(self) -> Any:
        response = self.inner.finish()
        return attrs.evolve(response, usage=Usage(output_tokens=response.usage.output_tokens))


class _UnreportedAdapter(ScriptedAdapter):
    def stream_parser(self) -> Any:
        return _UnreportedParser(super().stream_parser())


async def test_the_estimate_counts_the_history_without_reading_it(env: Env) -> None:
    """With no reported tokens, every turn's estimate equals four characters per token
    over the prompt, the user text, the committed history, the new parts and the tool
    schemas, as counting the loaded history gives (cursor turns included)."""
    store, engine = counting(env, {"openai": _UnreportedAdapter("openai")})
    env.backend.push("openai", ScriptStep.reply("a first answer"),
                     ScriptStep.call(("weather", {"city": "Oslo"}), text="looking"),
                     ScriptStep.reply("cold"), ScriptStep.reply("ünïcödé 😀 \x00 end"))
    for text in ("first", "second, with a tool", "third 😀"):
        history = await env.store.load_history(env.chat_id)
        reads = store.reads
        outcome = await turn(engine, env, text)
        [snapshot] = [e.snapshot for e in outcome.of_type("context_snapshot")]
        new = (await env.store.load_history(env.chat_id))[-1].parts
        schemas = sum(len(json.dumps(t.spec.parameters)) for t in make_turn().tools)
        chars = (len("You are terse.") + len(text) + schemas + part_chars(new)
                 + part_chars([p for m in history for p in m.parts]))
        assert snapshot.source == "estimate"
        assert snapshot.estimated_input_tokens == math.ceil(chars / 4)
        assert store.reads - reads == (outcome.final.strategy != "cursor")


async def test_the_history_benchmark_times_cursor_turns_only(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """``bench_engine``'s figures by history length time cursor turns at 10, 1,000 and
    10,000 messages: the history is read once per chat (its replay turn, untimed), never
    by a timed turn. On gpt-4o's window the 10,000-message replay overflowed, stored no
    cursor, and every timed turn was an aborted replay reading 10,000 messages."""
    from benchmarks import bench_engine

    monkeypatch.setattr(bench_engine, "SAMPLES", 4)
    store = CountingStore(MemoryStore())
    await bench_engine.by_history_length("MemoryStore", store)  # type: ignore[arg-type]
    chats = 4 + 1 + 1  # 4 chats of 10 messages (one timed turn each), one of each other
    assert store.reads == chats
    assert "10000 msgs" in capsys.readouterr().out
