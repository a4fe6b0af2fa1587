"""Hypothesis drives the real engine, an SQLite file and the five emulators over loopback.

With ``TURNSTATE_PROPERTY_STORE=postgres`` the store is a ``PostgresStore`` on the test
run's schema instead (``tests/pg_support.py``); the ``postgres`` hypothesis profile runs
a modest number of programs for CI.

Each program is a conversation: user turns on drawn providers and models (with drawn
parallel tool calls, tool errors and thinking), system prompt and toolset changes,
cursors expired or evicted at the provider, injected faults (a transient error, a fatal
error, a malformed frame, a cancelled turn, the cursor lost while a tool runs), edits
and deletes of persisted messages, corrupted audit states, and reopening the store.
After every step the raw SQL rows and the emulators' records are checked against
DESIGN.md section 2 and against ``tests/properties/reference.py``.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import sys
import tempfile
from contextlib import aclosing
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import event, note, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from tests import pg_support
from tests.conftest import PROFILE
from tests.engine.support import FakeClock, Outcome, make_turn
from tests.properties import reference
from tests.strategies import LIVE_MODELS, live_toolset, toolset_changes
from turnstate.core import (
    TextPart,
    ToolCallPart,
    ToolResultPart,
    parse_envelope,
    system_prompt_hash,
    toolset_hash,
)
from turnstate.core._events import TurnEvent
from turnstate.core._replay_roles import alternating_history
from turnstate.emulators import Fault
from turnstate.emulators._base import items_from_messages
from turnstate.emulators._emulated import EmulatedProviders
from turnstate.engine import TurnEngine
from turnstate.providers._transport import AiohttpTransport, RetryPolicy
from turnstate.states import TRANSITIONS
from turnstate.storage import PostgresStore, SqliteStore

EDGES = {(e.source.value, e.trigger.value, e.dest.value) for e in TRANSITIONS}
PROMPTS = ("Be terse.", "Be kind.")
PROGRAMS = {"ci": 200, "deep": 2000, "postgres": 50}.get(PROFILE, 30)
STORE = os.environ.get("TURNSTATE_PROPERTY_STORE", "sqlite")
PG_SCHEMA = f"{pg_support.SCHEMA}_live"
FAULT_BODIES = {
    "openai": {"error": {"message": "bad", "type": "invalid_request_error", "code": None,
                         "param": None}},
    "gemini": {"error": {"code": "invalid_argument", "message": "bad"}},
    "openai-compatible": {"error": {"message": "bad", "type": "invalid_request_error",
                                    "code": None, "param": None}},
    "deepseek": {"error": {"message": "bad", "type": "invalid_request_error",
                           "code": "invalid_request_error", "param": None}},
    "anthropic": {"type": "error", "error": {"type": "invalid_request_error",
                                             "message": "bad"}},
}


@attrs.define
class Rig:
    """The running parts of one program."""

    loop: asyncio.AbstractEventLoop
    folder: tempfile.TemporaryDirectory[str]
    stack: EmulatedProviders
    transport: AiohttpTransport
    store: SqliteStore | PostgresStore
    store_cm: Any
    engine: TurnEngine
    clock: FakeClock
    chat_id: str
    closed: list[Any] = attrs.Factory(list)  # the stores ``reopen_store`` closed
    late: list[asyncio.Task[Any]] = attrs.Factory(list)  # tasks they started since

    def run(self, coro: Any) -> Any:
        return self.loop.run_until_complete(coro)

    def raw(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        if STORE == "postgres":  # numbered placeholders; jsonb comes back as its own text
            numbers = itertools.count(1)
            sql = "".join(f"${next(numbers)}" if c == "?" else c for c in sql)
        return [tuple(row) for row in self.run(self.store.fetch_raw(sql, params))]

    def watch_closed_stores(self) -> None:
        """Keep in ``late`` every task whose coroutine is a method of a closed store or
        of its turn log (the coroutine's ``self``): a closed store must start nothing."""

        def factory(loop: asyncio.AbstractEventLoop, coro: Any, **options: Any) -> Any:
            task = asyncio.Task(coro, loop=loop, **options)
            frame = getattr(coro, "cr_frame", None)
            owner = frame.f_locals.get("self") if frame is not None else None
            if owner is not None and any(owner is part for store in self.closed
                                         for part in (store, store.turn_log)):
                self.late.append(task)
            return task

        self.loop.set_task_factory(factory)


async def _open_store(path: Path, clock: FakeClock) -> tuple[Any, SqliteStore | PostgresStore]:
    manager: Any = (PostgresStore.open(pg_support.DSN, schema=PG_SCHEMA, clock=clock,
                                       pool_max=2)
                    if STORE == "postgres" else SqliteStore.open(path, clock=clock))
    return manager, await manager.__aenter__()


async def _rig(loop: asyncio.AbstractEventLoop) -> Rig:
    folder = tempfile.TemporaryDirectory(prefix="turnstate-live-")
    clock = FakeClock()
    stack = await EmulatedProviders(
        adapter_options={"anthropic": {"thinking_budget_tokens": 1024}}).start()
    transport = AiohttpTransport(retry=RetryPolicy(base_delay=0.0, max_delay=0.0))
    manager, store = await _open_store(Path(folder.name) / "live.sqlite", clock)
    engine = TurnEngine(store, stack.adapters, transport, clock=clock)
    chat = await store.create_chat(owner="hypothesis")
    return Rig(loop, folder, stack, transport, store, manager, engine, clock, chat.id)


class LiveConversation(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.rig = self.loop.run_until_complete(_rig(self.loop))
        self.rig.watch_closed_stores()
        self.prompt = PROMPTS[0]
        self.tools = ("weather", "time")
        self.stored: reference.Stored | None = None
        self.turn_index = 0
        self.last_choice = LIVE_MODELS[0]

    def teardown(self) -> None:
        rig = self.rig
        rig.run(rig.engine.aclose())
        rig.run(rig.store_cm.__aexit__(None, None, None))
        rig.run(rig.transport.aclose())
        rig.run(rig.stack.close())
        self.loop.close()
        rig.folder.cleanup()

    # --- rules ---------------------------------------------------------------------------

    @rule(choice=st.sampled_from(LIVE_MODELS), calls=st.integers(0, 3),
          rounds=st.integers(1, 2), think=st.booleans(), broken=st.booleans())
    def user_turn(self, choice: tuple[str, str], calls: int, rounds: int, think: bool,
                  broken: bool) -> None:
        self._turn(choice, calls=calls, rounds=rounds, think=think, broken=broken, fault=None)

    @rule(calls=st.integers(0, 3), rounds=st.integers(1, 2), think=st.booleans())
    def same_model_again(self, calls: int, rounds: int, think: bool) -> None:
        """Most real turns keep the provider and model: the cursor path."""
        self._turn(self.last_choice, calls=calls, rounds=rounds, think=think, broken=False,
                   fault=None)

    @rule(calls=st.integers(0, 2), rounds=st.integers(1, 2), evict_at=st.integers(1, 2),
          fault=st.sampled_from(["transient", "fatal", "malformed", "cancel",
                                 "evict_mid_turn"]), recover=st.booleans())
    def same_model_with_fault(self, calls: int, rounds: int, evict_at: int, fault: str,
                              recover: bool) -> None:
        """A fault on the cursor path; the cursor may die at a drawn tool iteration, and
        the turn may have opted in to recovering the results in flight."""
        self._turn(self.last_choice, calls=calls, rounds=rounds, think=False, broken=False,
                   fault=fault, evict_at=evict_at, recover=recover)

    @rule(choice=st.sampled_from(LIVE_MODELS), calls=st.integers(0, 2),
          fault=st.sampled_from(["transient", "fatal", "malformed", "cancel",
                                 "evict_mid_turn"]), recover=st.booleans())
    def faulty_turn(self, choice: tuple[str, str], calls: int, fault: str,
                    recover: bool) -> None:
        self._turn(choice, calls=calls, rounds=1, think=False, broken=False, fault=fault,
                   recover=recover)

    @rule(prompt=st.sampled_from(PROMPTS))
    def change_system_prompt(self, prompt: str) -> None:
        self.prompt = prompt

    @rule(data=st.data())
    def change_toolset(self, data: st.DataObject) -> None:
        self.tools = data.draw(toolset_changes(self.tools))

    @rule(evict=st.booleans())
    def provider_forgets_cursor(self, evict: bool) -> None:
        """The provider expires the stored cursor (or evicts everything it stored)."""
        if self.stored is None:
            return
        emulator: Any = self.rig.stack.emulators[self.stored.provider]
        if evict:
            emulator.evict_all()
        else:
            emulator.expire(parse_envelope(self._chat_row()[0]).cursor)
        self.stored = attrs.evolve(self.stored, alive=False)

    @rule(days=st.sampled_from([1, 31, 56]))
    def time_passes(self, days: int) -> None:
        self.rig.clock.advance(days=days)

    @rule(delete=st.booleans(), pick=st.integers(0, 10_000))
    def rewrite_history(self, delete: bool, pick: int) -> None:
        history = self.rig.run(self.rig.store.load_history(self.rig.chat_id))
        if not history:
            return
        seq = history[pick % len(history)].seq
        if delete:
            self.rig.run(self.rig.store.delete_message(self.rig.chat_id, seq))
        else:
            self.rig.run(self.rig.store.edit_message(self.rig.chat_id, seq,
                                                     [TextPart(text=f"edited {pick}")]))
        assert self._chat_row()[0] is None  # invariant 5: cleared in the same transaction
        self.stored = None

    @rule()
    def corrupt_audit_states(self) -> None:
        """Invariant 3: garbage in messages.provider_state must change nothing later."""
        self.rig.raw("UPDATE messages SET provider_state = ? WHERE provider_state IS NOT NULL",
                     ('{"schemaVersion":1,"provider":"openai","mode":"responses",'
                      '"cursor":"resp_forged"}',))

    @rule()
    def reopen_store(self) -> None:
        """A restart: the engine closed before its store, a new one on the store opened
        again (an engine keeps its store's fence watch: it is never given another)."""
        rig = self.rig
        rig.run(rig.engine.aclose())
        rig.run(rig.store_cm.__aexit__(None, None, None))
        rig.closed.append(rig.store)
        rig.store_cm, rig.store = rig.run(_open_store(Path(rig.folder.name) / "live.sqlite",
                                                      rig.clock))
        rig.engine = TurnEngine(rig.store, rig.stack.adapters, rig.transport, clock=rig.clock)

    # --- one turn --------------------------------------------------------------------------

    def _turn(self, choice: tuple[str, str], *, calls: int, rounds: int, think: bool,
              broken: bool, fault: str | None, evict_at: int = 1,
              recover: bool = False) -> None:
        provider, model = choice
        self.last_choice = choice
        rig = self.rig
        evicts = fault == "evict_mid_turn" and provider in reference.DURABLE
        names = [t.spec.name for t in live_toolset(self.tools)
                 if t.spec.name != "broken" or broken]
        tools = live_toolset(self.tools, evict=rig.stack.emulators[provider] if evicts else None,
                             evict_from_call=(evict_at - 1) * calls + 1)
        directives = [f"[[call:{names[i % len(names)]}]]" for i in range(calls)] if names else []
        text = " ".join([*directives, f"[[rounds:{rounds}]]", "[[think]]" * think,
                         f"turn {self.turn_index}"])
        real_rounds = rounds if directives else 0
        turn = make_turn(text, provider=provider, model=model, prompt=self.prompt, tools=tools,
                         recover_tool_results=recover)
        ref_turn = reference.Turn(provider=provider, model=model,
                                  prompt_hash=system_prompt_hash(self.prompt),
                                  tools_hash=toolset_hash([t.spec.as_mapping() for t in tools]),
                                  rounds=real_rounds, fault=fault, evict_at=evict_at,
                                  recover=recover)
        expected = reference.expect(self.stored, ref_turn, rig.clock.now)
        before_row = self._chat_row()[0]
        seen_before = len(rig.stack.emulators[provider].requests)
        self._inject(provider, fault)
        outcome = self._run(turn, cancel=fault == "cancel")
        self.turn_index += 1
        note(f"{provider}/{model} {fault or ''} recover={recover}: "
             f"{outcome.triggers if outcome else 'cancelled'}")
        event(f"live turn: {expected.outcome}, {expected.strategy}, {expected.reason}")
        made = len(rig.stack.emulators[provider].requests) - seen_before
        self._check_turn(outcome, expected, made=made, fault=fault, before_row=before_row,
                         turn=ref_turn)
        if fault == "evict_mid_turn" and expected.outcome == "tool_result_cursor_loss" \
                and self.stored is not None and self.stored.provider == provider:
            # The tools evicted this turn's provider only: a cursor kept from another
            # (a provider_changed replay that aborted) is still alive there.
            self.stored = attrs.evolve(self.stored, alive=False)

    def _inject(self, provider: str, fault: str | None) -> None:
        emulator: Any = self.rig.stack.emulators[provider]
        if fault == "transient":
            emulator.faults.push(Fault(status=503, body=FAULT_BODIES[provider]))
        elif fault == "fatal":
            emulator.faults.push(Fault(status=400, body=FAULT_BODIES[provider]))
        elif fault == "malformed":
            emulator.faults.push(Fault(malformed_after=1))

    def _run(self, turn: Any, *, cancel: bool) -> Outcome | None:
        async def consume() -> Outcome | None:
            events: list[TurnEvent] = []
            async with aclosing(self.rig.engine.run_turn(self.rig.chat_id, turn)) as stream:
                async for item in stream:
                    events.append(item)
                    if cancel and item.type == "state_changed" and item.source == "validate":
                        return None
            return Outcome(events=tuple(events))

        return self.rig.run(consume())

    def _check_turn(self, outcome: Outcome | None, expected: reference.Expected, *,
                    made: int, fault: str | None, before_row: str | None,
                    turn: reference.Turn) -> None:
        record = self.rig.run(self.rig.store.list_turns(self.rig.chat_id, limit=1))[0]
        path = record.path
        assert path[0].source == "validate" and path[-1].dest in {"done", "aborted"}
        assert {(s.source, s.trigger, s.dest) for s in path} <= EDGES
        assert all(a.dest == b.source for a, b in itertools.pairwise(path))
        outcome_name = "committed" if record.status == "completed" else record.reason
        assert (outcome_name, record.strategy) == (expected.outcome, expected.strategy), \
            (record, expected)
        degradations = [_degradation(s) for s in path if _degradation(s) is not None]
        assert (degradations[0] if degradations else None) == expected.reason
        if outcome is not None:
            assert outcome.final.stats.requests == expected.requests
        if fault in (None, "evict_mid_turn"):
            assert made == expected.requests  # 1 + tool iterations (+1 on cursor loss)
        self._check_transition_parts(record, degradations)
        row = self._chat_row()[0]
        if expected.stored_after == "unchanged":
            assert row == before_row
        elif expected.stored_after is None:
            assert row is None
        else:
            envelope = parse_envelope(row)
            assert (envelope.provider, envelope.model_name, envelope.system_prompt_hash,
                    envelope.toolset_hash) == (turn.provider, turn.model, turn.prompt_hash,
                                               turn.tools_hash)
            assert envelope.covers_seq == record.assistant_seq
        if expected.stored_after != "unchanged":
            self.stored = expected.stored_after  # type: ignore[assignment]

    def _check_transition_parts(self, record: Any, degradations: list[str | None]) -> None:
        [(raw_parts,)] = self.rig.raw("SELECT parts FROM messages WHERE chat_id = ? AND seq = ?",
                                      (self.rig.chat_id, record.assistant_seq))
        parts = [p for p in json.loads(raw_parts) if p["type"] == "continuation_transition"]
        assert [p["reason"] for p in parts] == degradations
        assert all(p["recovered"] is (record.status == "completed") for p in parts)

    def _chat_row(self) -> tuple[Any, ...]:
        [row] = self.rig.raw("SELECT last_provider_state, version FROM chats WHERE id = ?",
                             (self.rig.chat_id,))
        return row

    # --- invariants ------------------------------------------------------------------------

    @invariant()
    def nothing_stateless_is_stored(self) -> None:
        """Invariant 1, on the raw rows of both JSON columns that hold provider state."""
        for (value,) in self.rig.raw("SELECT last_provider_state FROM chats UNION ALL "
                                     "SELECT provider_state FROM messages"):
            assert value is None or ("stateless-loop" not in value
                                     and "loopMessages" not in value)

    @invariant()
    def the_cursor_stands_for_the_committed_history(self) -> None:
        """Invariant 2, from the emulator's own record of what the cursor means."""
        row = self._chat_row()[0]
        if row is None:
            return
        envelope = parse_envelope(row)
        emulator: Any = self.rig.stack.emulators[envelope.provider]
        history = self.rig.run(self.rig.store.load_history(self.rig.chat_id))
        # The cursor stands for the history as it was replayed: laid out user first and
        # alternating, a deleted question's place marked (replay7's placeholders).
        replayed, _, _ = alternating_history(history)
        assert emulator.conversation_for(envelope.cursor) == items_from_messages(replayed)

    @invariant()
    def no_tool_result_is_dropped(self) -> None:
        """Every committed tool call has its result in the committed history."""
        history = self.rig.run(self.rig.store.load_history(self.rig.chat_id))
        for message in history:
            calls = {p.call_id for p in message.parts if isinstance(p, ToolCallPart)}
            results = {p.call_id for p in message.parts if isinstance(p, ToolResultPart)}
            assert calls <= results, message

    @invariant()
    def a_closed_store_starts_nothing(self) -> None:
        """A reopened store's engine watches the new store, not the closed one (whose
        listening connection or file watch nothing would close)."""
        assert [task.get_name() for task in self.rig.late] == []

    @invariant()
    def no_lease_is_left_behind(self) -> None:
        [(active,)] = self.rig.raw("SELECT active_turn_id FROM chats WHERE id = ?",
                                   (self.rig.chat_id,))
        assert active is None


_DEGRADATION_TRIGGERS = {"provider_changed", "model_changed", "system_prompt_changed",
                         "toolset_changed", "cursor_expired", "cursor_invalid",
                         "envelope_malformed"}


def _degradation(step: Any) -> str | None:
    """The transition part a path step writes: its reason for a degradation trigger, and
    ``tool_result_cursor_loss`` for the recovery edge (its step reason is the provider's)."""
    if step.trigger in _DEGRADATION_TRIGGERS:
        return str(step.reason)
    if step.trigger == "tool_result_cursor_loss" and step.dest == "replay":
        return "tool_result_cursor_loss"
    if step.trigger == "context_overflow" and step.dest == "replay":
        return "context_overflow"  # the degradation; into abort it writes no part
    return None

LiveConversation.TestCase.settings = settings(
    settings.default, max_examples=PROGRAMS, stateful_step_count=12, deadline=None,
)
TestLiveConversations = LiveConversation.TestCase

if os.environ.get("TURNSTATE_LIVE_SEED"):  # pragma: no cover - manual reproduction aid
    TestLiveConversations.settings = settings(TestLiveConversations.settings, derandomize=True)


@pytest.mark.parametrize("pick", [0, 1], ids=["question", "answer"])
def test_the_cursor_after_a_deletion_stands_for_the_history_as_replayed(
        pick: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """The example hypothesis found (lead, 2026-12-05): a turn, its question (or answer)
    deleted, a turn. The replay laid the history out with a placeholder where the deleted
    message was, so the cursor it left stands for that layout, not for the stored rows."""
    monkeypatch.setattr(sys.modules[__name__], "note", lambda _text: None)  # outside a given
    monkeypatch.setattr(sys.modules[__name__], "event", lambda *_args: None)
    state = LiveConversation()
    try:
        state.same_model_again(calls=0, rounds=1, think=False)
        state.rewrite_history(delete=True, pick=pick)
        state.same_model_again(calls=0, rounds=1, think=False)
        state.the_cursor_stands_for_the_committed_history()
        state.same_model_again(calls=1, rounds=1, think=False)  # on by cursor
        state.the_cursor_stands_for_the_committed_history()
    finally:
        state.teardown()


def test_a_turn_after_reopening_the_store_watches_the_new_store(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """soak9's example (``--hypothesis-seed`` 3 and 8 on PostgreSQL): a turn, the store
    reopened, a turn. The engine kept the closed store's fence watch (its first heartbeat
    queue), so the turn opened a listening connection on the closed PostgreSQL store
    (a file watch on SQLite) that nothing closed; with the loop closed under it, the
    pending open failed the run as an unraisable exception."""
    monkeypatch.setattr(sys.modules[__name__], "note", lambda _text: None)  # outside a given
    monkeypatch.setattr(sys.modules[__name__], "event", lambda *_args: None)
    state = LiveConversation()
    try:
        state.same_model_again(calls=0, rounds=1, think=False)
        state.reopen_store()
        state.same_model_again(calls=0, rounds=1, think=False)
        state.a_closed_store_starts_nothing()
        state.the_cursor_stands_for_the_committed_history()
    finally:
        state.teardown()


def test_a_cursor_lost_on_another_provider_leaves_the_stored_one_alive(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """soak9's example (the outcome ``('committed', 'cursor') != ('committed', 'replay')``):
    an OpenAI turn commits its cursor; a Gemini turn (``provider_changed``, a replay)
    loses its cursor while a tool runs and aborts, leaving the OpenAI cursor stored; the
    next OpenAI turn continues by it. The eviction hit Gemini's emulator only, so the
    model must not believe the stored OpenAI cursor forgotten."""
    monkeypatch.setattr(sys.modules[__name__], "note", lambda _text: None)  # outside a given
    monkeypatch.setattr(sys.modules[__name__], "event", lambda *_args: None)
    state = LiveConversation()
    try:
        state.same_model_again(calls=0, rounds=1, think=False)  # openai/gpt-4o
        state.faulty_turn(choice=("gemini", "gemini-2.5-flash"), calls=1,
                          fault="evict_mid_turn", recover=False)
        state.user_turn(choice=LIVE_MODELS[0], calls=0, rounds=1, think=False, broken=False)
        state.the_cursor_stands_for_the_committed_history()
    finally:
        state.teardown()
