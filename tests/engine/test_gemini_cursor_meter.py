"""A long Gemini Interactions chat on durable cursors sees its real context (gemctx).

Real Gemini reports only the new input on a ``previous_interaction_id`` turn (the
recorded ``multi-turn-stateful`` second turn: 12 input tokens), and so does the emulator
by default (``cursor_usage="incremental"``). Before the fix the snapshot took that count
(``source: "provider"``): the meter of a long cursor chat stayed near empty, the
proactive ``context_critical`` → trimmed replay never fired, and the chat recovered only
after the provider refused a request. OpenAI Responses counts the whole conversation on
a cursor turn, so its count stands."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests import pg_support
from tests.engine.support import collect
from turnstate.core._context import ContextSettings, TokenSource, context_snapshot
from turnstate.core._events import TurnAborted, TurnCompleted
from turnstate.core._registry import DEFAULT_REGISTRY, ModelInfo
from turnstate.emulators import EmulatedProviders
from turnstate.engine import TurnEngine, TurnInput
from turnstate.providers._transport import AiohttpTransport
from turnstate.storage import MemoryStore, Store, open_store

LIMIT = 200_000
REGISTRY = (DEFAULT_REGISTRY
            .with_model(ModelInfo(provider="gemini", name="demo-small-window",
                                  context_limit=LIMIT))
            .with_model(ModelInfo(provider="openai", name="demo-small-window",
                                  context_limit=LIMIT)))
NO_COMPACTION = ContextSettings(provider_compaction_enabled=False)


def _filler(number: int) -> str:
    return f"turn {number}: " + "lorem ipsum dolor sit amet " * 400  # about 2,700 tokens


@pytest.fixture
async def engine_for(request: pytest.FixtureRequest) -> AsyncIterator[
        tuple[str, Any, TurnEngine, MemoryStore]]:
    provider = request.param
    async with EmulatedProviders([provider]) as providers, AiohttpTransport() as transport:
        emulator = providers.emulators[provider]
        emulator.context_windows["demo-small-window"] = LIMIT  # type: ignore[attr-defined]
        store = MemoryStore()
        yield provider, emulator, TurnEngine(store, providers.adapters, transport,
                                             registry=REGISTRY), store


async def _chat(provider: str, engine: TurnEngine, store: Store,
                turns: int) -> list[tuple[TurnCompleted | TurnAborted, dict[str, Any]]]:
    chat = await store.create_chat(owner="alice")
    out = []
    for number in range(turns):
        turn = TurnInput(provider=provider, model="demo-small-window",
                         system_prompt="You are terse.", user_text=_filler(number),
                         context=NO_COMPACTION)
        final = (await collect(engine.run_turn(chat.id, turn))).events[-1]
        assert isinstance(final, TurnCompleted | TurnAborted)
        row = await store.load_chat(chat.id)
        out.append((final, json.loads(row.last_context_state or "{}")))
    return out


def _steps(final: TurnCompleted | TurnAborted) -> list[tuple[str, str, str]]:
    return [(s.source, s.trigger, s.dest) for s in final.path]


@pytest.mark.parametrize("engine_for", ["gemini"], indirect=True)
async def test_a_long_gemini_cursor_chat_switches_before_the_provider_refuses(
        engine_for: tuple[str, Any, TurnEngine, MemoryStore]) -> None:
    provider, emulator, engine, store = engine_for
    assert emulator.cursor_usage == "incremental"
    _check_long_chat(await _chat(provider, engine, store, 80))


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_the_chain_figure_survives_every_store(
        backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """The figure is read back from the stored snapshot text, however the store keeps
    it (PostgreSQL's JSON column included)."""
    if backend == "postgres":
        target = f"{pg_support.DSN}?schema={request.getfixturevalue('pg_schema')}_gemctx"
    else:
        target = str(tmp_path / "chats.db")
    async with (EmulatedProviders(["gemini"]) as providers, AiohttpTransport() as transport,
                open_store(target) as store):
        providers.emulators["gemini"].context_windows["demo-small-window"] = LIMIT  # type: ignore[attr-defined]
        engine = TurnEngine(store, providers.adapters, transport, registry=REGISTRY)
        turns = await _chat("gemini", engine, store, 74)
    _check_long_chat(turns)


def _check_long_chat(turns: list[tuple[TurnCompleted | TurnAborted, dict[str, Any]]]) -> None:
    assert all(isinstance(final, TurnCompleted) for final, _ in turns)
    refused = [n for n, (final, _) in enumerate(turns)
               if ("cursor", "context_overflow", "replay") in _steps(final)]
    proactive = [n for n, (final, _) in enumerate(turns)
                 if ("validate", "context_overflow", "replay") in _steps(final)]
    # The meter rose on cursor turns: warning or worse, from the estimate.
    rising = [(n, snap["severity"]) for n, (final, snap) in enumerate(turns)
              if final.strategy == "cursor"
              and snap["severity"] in ("warning", "danger", "critical")]
    assert rising, [(f.strategy, s["severity"], s["estimatedInputTokens"]) for f, s in turns]
    assert all(turns[n][1]["source"] == "estimate" for n, _ in rising)
    # The proactive switch fired, and before any refusal by the provider.
    assert proactive, [(f.strategy, s["severity"]) for f, s in turns]
    assert not refused, (proactive, refused)
    # The trimmed replay began a new chain: the next turns go by cursor again, their
    # estimate counting the history that chain holds (not the whole chat's).
    first = proactive[0]
    assert proactive == [first], proactive
    dropped = turns[first][1]["droppedHistoryChars"]
    assert dropped > 0
    after = turns[first + 1:]
    assert after and all(f.strategy == "cursor" for f, _ in after)
    assert all(snap["droppedHistoryChars"] == dropped for _, snap in after)
    assert after[0][1]["severity"] in ("normal", "info"), after[0][1]
    assert [f.strategy for f, _ in turns[1:first]] == ["cursor"] * (first - 1)


@pytest.mark.parametrize("engine_for", ["openai"], indirect=True)
async def test_an_openai_cursor_turn_keeps_the_providers_whole_count(
        engine_for: tuple[str, Any, TurnEngine, MemoryStore]) -> None:
    """Responses' usage on a ``previous_response_id`` turn counts the conversation the
    provider holds: the snapshot stays ``provider`` and grows turn by turn."""
    provider, _, engine, store = engine_for
    turns = await _chat(provider, engine, store, 4)
    assert [final.strategy for final, _ in turns] == ["replay"] + ["cursor"] * 3
    assert all(snap["source"] == "provider" for _, snap in turns)
    counts = [snap["estimatedInputTokens"] for _, snap in turns]
    assert counts == sorted(counts) and counts[-1] > 3 * counts[0] // 2


def test_the_partial_rule_is_gemini_cursor_turns_only() -> None:
    from turnstate.core._context import reports_partial_input

    assert reports_partial_input("gemini", cursor=True)
    assert not reports_partial_input("gemini", cursor=False)
    for provider in ("openai", "anthropic", "deepseek", "openai-compatible"):
        assert not reports_partial_input(provider, cursor=True)


def test_a_partial_count_below_the_estimate_gives_way_to_it() -> None:
    low = context_snapshot(provider="gemini", model="gemini-2.5-flash",
                           reported_input_tokens=12, estimated_tokens=900_000, partial=True)
    assert (low.estimated_input_tokens, low.source, low.severity) == (
        900_000, TokenSource.ESTIMATE, "warning")
    high = context_snapshot(provider="gemini", model="gemini-2.5-flash",
                            reported_input_tokens=1_000, estimated_tokens=900, partial=True)
    assert (high.estimated_input_tokens, high.source) == (1_000, TokenSource.PROVIDER)
    whole = context_snapshot(provider="openai", model="gpt-4o",
                             reported_input_tokens=12, estimated_tokens=90_000)
    assert (whole.estimated_input_tokens, whole.source) == (12, TokenSource.PROVIDER)


def test_the_chain_figure_is_read_without_a_parse_and_stored_only_when_set() -> None:
    from turnstate.core._context import dropped_chars_of
    from turnstate.core._event_json import event_json, plain
    from turnstate.core._events import ContextSnapshotEvent
    from turnstate.storage._record_encoders import encode_context
    from turnstate.storage._records import decode_context

    plain_snapshot = context_snapshot(provider="gemini", model="gemini-2.5-flash",
                                      reported_input_tokens=10, estimated_tokens=0)
    text = encode_context(plain_snapshot)
    assert text is not None and "dropped" not in text and dropped_chars_of(text) == 0
    assert decode_context(text) == plain_snapshot
    carried = context_snapshot(provider="gemini", model="gemini-2.5-flash",
                               reported_input_tokens=10, estimated_tokens=900_000,
                               partial=True, dropped_history_chars=123_456)
    text = encode_context(carried)
    assert text is not None and dropped_chars_of(text) == 123_456
    assert decode_context(text) == carried and "critical" not in text
    assert dropped_chars_of(None) == 0
    # PostgreSQL's jsonb spacing and key order
    assert dropped_chars_of('{"source": "estimate", "droppedHistoryChars": 77, '
                            '"severity": "info"}') == 77
    for snapshot in (plain_snapshot, carried):
        event = ContextSnapshotEvent(snapshot=snapshot)
        assert json.loads(event_json(event)) == {**plain(event), "type": event.type}


async def test_the_emulator_counts_a_function_result_with_its_turns_tool_loop() -> None:
    """As ``tool-call-step2`` does (161 input tokens: the first step's 53 input, 15
    output and 65 thought tokens and the result): a function result sent by cursor
    reports the turn's loop from its user input on; the next question reports itself."""
    from tests.engine.support import tool

    async with EmulatedProviders(["gemini"]) as providers, AiohttpTransport() as transport:
        store = MemoryStore()
        engine = TurnEngine(store, providers.adapters, transport)
        chat = await store.create_chat(owner="alice")
        emulator: Any = providers.emulators["gemini"]
        for text in ("x" * 4_000 + " [[call:weather]]", "short"):
            turn = TurnInput(provider="gemini", model="gemini-2.5-flash", system_prompt="Hi.",
                             user_text=text, tools=(tool("weather"),))
            final = (await collect(engine.run_turn(chat.id, turn))).events[-1]
            assert isinstance(final, TurnCompleted), final
        bodies = [json.loads(r.body) for r in emulator.requests]
    assert [("previous_interaction_id" in b) for b in bodies] == [False, True, True]
    inputs = [i.body["usage"]["total_input_tokens"] for i in emulator.interactions.values()]
    assert inputs[0] > 1_000 and inputs[1] > inputs[0]  # the loop, with the call
    assert inputs[2] < 100  # the next question alone
