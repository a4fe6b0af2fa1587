"""Hypothesis drives multi-turn conversations through the engine (MemoryStore, scripted
providers) and checks DESIGN.md section 2 invariants 1, 3 and 4 after every turn.

Two worlds run the same program side by side; before every turn the second world's
audit states (``messages.provider_state``) are overwritten with garbage. Invariant 3
says that can never change a later turn, so both worlds must send the same requests,
take the same paths and store the same continuation state.
"""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import attrs
from hypothesis import event, note, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from tests.engine.support import FakeClock, Outcome, collect, make_turn
from tests.strategies import behaviours, turn_settings
from turnstate.core import parse_envelope
from turnstate.emulators._scripted import ScriptedBackend
from turnstate.engine import TurnEngine
from turnstate.states import TRANSITIONS
from turnstate.storage import MemoryStore

EDGES = {(e.source.value, e.trigger.value, e.dest.value) for e in TRANSITIONS}
GARBAGE = ('{"schemaVersion":1,"provider":"openai","mode":"responses","modelName":"x",'
           '"systemPromptHash":"h","toolsetHash":"t","cursor":"resp_forged"}')


@attrs.define
class World:
    clock: FakeClock
    store: MemoryStore
    backend: ScriptedBackend
    engine: TurnEngine
    chat_id: str


async def _world() -> World:
    clock = FakeClock()
    store = MemoryStore(clock=clock)
    backend = ScriptedBackend()
    engine = TurnEngine(store, backend.adapters(), backend, clock=clock)
    chat = await store.create_chat(owner="prop", chat_id="chat-1")
    return World(clock, store, backend, engine, chat.id)


class ConversationMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.plain = self.loop.run_until_complete(_world())
        self.corrupted = self.loop.run_until_complete(_world())
        self.turns = 0

    def teardown(self) -> None:
        self.loop.close()

    def _raw_state(self, world: World) -> str | None:
        return world.store.raw_chat_state(world.chat_id)

    @rule(settings=turn_settings(), behaviour=behaviours())
    def user_turn(self, settings: dict[str, Any], behaviour: list[Any]) -> None:
        self._corrupt_audit(self.corrupted)
        before = self._raw_state(self.plain)
        outcomes = []
        for world in (self.plain, self.corrupted):
            world.backend.push(settings["provider"], *behaviour)
            turn = make_turn(f"turn {self.turns}", **settings)
            outcomes.append(self.loop.run_until_complete(
                collect(world.engine.run_turn(world.chat_id, turn))))
        self.turns += 1
        plain, corrupted = outcomes
        note(f"{settings['provider']}/{settings['model']}: {plain.triggers}")
        event(f"turn ended {'committed' if plain.committed else plain.final.reason}")
        event(f"degradation {plain.final.degradation}")
        self._check_path(plain)
        self._check_same(plain, corrupted)
        self._check_invariant_4(plain, before)

    @rule(days=st.sampled_from([1, 31, 60]))
    def time_passes(self, days: int) -> None:
        for world in (self.plain, self.corrupted):
            world.clock.advance(days=days)

    @rule()
    def provider_forgets_every_cursor(self) -> None:
        for world in (self.plain, self.corrupted):
            world.backend.expire_all()

    def _corrupt_audit(self, world: World) -> None:
        for row in world.store.raw_rows("messages"):
            world.store._messages[row["id"]]["provider_state"] = GARBAGE

    def _check_path(self, outcome: Outcome) -> None:
        steps = outcome.path
        assert steps[0].source == "validate" and steps[-1].dest in {"done", "aborted"}
        assert all(a.dest == b.source for a, b in itertools.pairwise(steps))
        assert {(s.source, s.trigger, s.dest) for s in steps} <= EDGES

    def _check_same(self, plain: Outcome, corrupted: Outcome) -> None:
        """Invariant 3: corrupt audit states changed nothing that follows."""
        assert plain.triggers == corrupted.triggers
        assert [r.body for r in self.plain.backend.requests] == \
            [r.body for r in self.corrupted.backend.requests]
        assert self._raw_state(self.plain) == self._raw_state(self.corrupted)

    def _check_invariant_4(self, outcome: Outcome, before: str | None) -> None:
        """Every committed turn rewrites the cursor; an aborted one never sets a new one."""
        after = self._raw_state(self.plain)
        if outcome.committed:
            provider = self.plain.backend.requests[-1].provider
            if provider in {"openai", "gemini"}:
                envelope = parse_envelope(after)
                last_id = self.plain.backend.response_ids[-1]
                assert envelope.cursor == last_id and envelope.provider == provider
            else:
                assert after is None
        else:
            assert after in {before, None}

    @invariant()
    def no_stateless_state_is_ever_stored(self) -> None:
        """Invariant 1, on the MemoryStore's stored text (chats and messages)."""
        for world in (self.plain, self.corrupted):
            for table in ("chats", "messages"):
                for row in world.store.raw_rows(table):
                    for value in row.values():
                        if isinstance(value, str):
                            assert "stateless-loop" not in value
                            assert "loopMessages" not in value


ConversationMachine.TestCase.settings = settings(
    settings.default,  # the loaded profile (ci / dev / deep) sets the scale
    max_examples=max(20, settings.default.max_examples // 3),
    stateful_step_count=10,
)
TestConversations = ConversationMachine.TestCase
