"""A static property of the transition table: on no path from ``validate`` can a
``stateless-loop`` state be handed to the store as the chat's provider state.

Every path is enumerated (tool loops unrolled up to the iteration limit) with the guards
evaluated on the facts as the driver evolves them. The argument has three steps, each
checked here:

1. The guards partition the paths: a stateless provider's turn never enters ``cursor``
   or ``replay``, a durable provider's never enters ``local_loop``, so a stateless-loop
   state only ever exists on paths through ``local_loop``.
2. The store receives a provider state only on the ``persist`` edge, and what it gets
   there is ``decide_turn_persistence`` of the turn's state: None for every stateless
   loop (checked for generated states of every path through ``local_loop``).
3. An abort hands the store no provider state at all (``TurnAbort`` has no such field).
"""

from __future__ import annotations

from collections.abc import Iterator

import attrs
from hypothesis import given
from hypothesis import strategies as st

from tests.strategies import loop_envelopes
from turnstate.core import Mode, decide_turn_persistence
from turnstate.states import GUARDS, TRANSITIONS, PathStep, State, Trigger, TurnFacts
from turnstate.storage import TurnAbort, TurnCommit

LIMIT = 3  # tool iterations unrolled per path


def _next_facts(facts: TurnFacts, trigger: Trigger, source: State) -> TurnFacts:
    """The facts after ``trigger``, as the driver changes them."""
    if trigger is Trigger.TOOLS_DONE:
        return attrs.evolve(facts, iterations_done=facts.iterations_done + 1,
                            tool_results_in_flight=True)
    if source is State.CURSOR and trigger in (Trigger.CURSOR_EXPIRED, Trigger.CURSOR_INVALID):
        return attrs.evolve(facts, replay_retry_used=True)
    return facts


def paths(facts: TurnFacts, state: State = State.VALIDATE,
          prefix: tuple[PathStep, ...] = ()) -> Iterator[tuple[PathStep, ...]]:
    """Every complete path the guards allow from ``state`` with ``facts``."""
    if state in (State.DONE, State.ABORTED):
        yield prefix
        return
    for edge in TRANSITIONS:
        if edge.source is not state or not all(GUARDS[g](facts) for g in edge.guards):
            continue
        if edge.trigger is Trigger.TOOLS_DONE and facts.iterations_done >= LIMIT:
            continue
        step = PathStep(source=state.value, trigger=edge.trigger.value, dest=edge.dest.value)
        yield from paths(_next_facts(facts, edge.trigger, state), edge.dest, (*prefix, step))


def visited(path: tuple[PathStep, ...]) -> set[str]:
    return {path[0].source, *(s.dest for s in path)}


DURABLE_PATHS = list(paths(TurnFacts(durable=True, iteration_limit=LIMIT)))
STATELESS_PATHS = list(paths(TurnFacts(durable=False, iteration_limit=LIMIT)))


def test_the_enumeration_covers_the_table() -> None:
    """Together the enumerated paths take every declared edge (so nothing is skipped)."""
    taken = {(s.source, s.trigger, s.dest) for p in DURABLE_PATHS + STATELESS_PATHS for s in p}
    assert taken == {(e.source.value, e.trigger.value, e.dest.value) for e in TRANSITIONS}
    assert len(DURABLE_PATHS) > 100 and len(STATELESS_PATHS) > 20


def test_guards_keep_stateless_turns_in_the_local_loop() -> None:
    """Step 1: stateless turns never reach cursor or replay; durable ones never local_loop."""
    assert all(not visited(p) & {"cursor", "replay"} for p in STATELESS_PATHS)
    assert all("local_loop" not in visited(p) for p in DURABLE_PATHS)


@given(data=st.data())
def test_no_path_persists_a_stateless_loop_state(data: st.DataObject) -> None:
    """Step 2: on every path through persist that can carry a stateless-loop state, what
    the store is handed is None."""
    persisting = [p for p in STATELESS_PATHS if any(s.dest == "persist" for s in p)]
    assert persisting
    path = data.draw(st.sampled_from(persisting))
    state = data.draw(loop_envelopes())
    assert state.mode is Mode.STATELESS_LOOP and "local_loop" in visited(path)
    assert decide_turn_persistence(state) is None


def test_an_abort_hands_the_store_no_provider_state() -> None:
    """Step 3: only the commit record has a provider_state field."""
    assert "provider_state" in attrs.fields_dict(TurnCommit)
    assert not any("state" in name for name in attrs.fields_dict(TurnAbort))
