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

The durable paths are enumerated with and without ``recover_tool_results``; every one
of them is checked against the recovery rules (issue 17): the recovery edge exists only
for turns that opted in, and no path makes more than one extra provider request.
"""

from __future__ import annotations

from collections.abc import Iterator

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.strategies import loop_envelopes
from turnstate.core import ContinuationEnvelope, Mode, decide_turn_persistence
from turnstate.states import (
    CALL_STATES,
    GUARDS,
    TRANSITIONS,
    Edge,
    PathStep,
    State,
    Trigger,
    TurnFacts,
)
from turnstate.states._guards import MAX_RETRIMS
from turnstate.storage import TurnAbort, TurnCommit

LIMIT = 3  # tool iterations unrolled per path
OUTGOING = {state: [e for e in TRANSITIONS if e.source is state] for state in State}
"""The table's edges by source state, in the table's order (the enumeration's index)."""


def _next_facts(facts: TurnFacts, edge: Edge) -> TurnFacts:
    """The facts after ``edge``, as the driver changes them."""
    if edge.trigger is Trigger.TOOLS_DONE:
        return attrs.evolve(facts, iterations_done=facts.iterations_done + 1,
                            tool_results_in_flight=True)
    if edge.source is State.CURSOR and edge.dest is State.REPLAY:
        return attrs.evolve(facts, replay_retry_used=True)
    if edge.trigger is Trigger.CONTEXT_REFUSED:
        return attrs.evolve(facts, retrims_done=facts.retrims_done + 1)
    return facts


def paths(facts: TurnFacts, state: State = State.VALIDATE,
          prefix: tuple[PathStep, ...] = ()) -> Iterator[tuple[PathStep, ...]]:
    """Every complete path the guards allow from ``state`` with ``facts``."""
    if state in (State.DONE, State.ABORTED):
        yield prefix
        return
    for edge in OUTGOING[state]:
        # The lease may be lost in any working state: the driver then drops lease_held.
        seen = attrs.evolve(facts, lease_held=False) \
            if edge.trigger is Trigger.LEASE_LOST else facts
        if not all(GUARDS[g](seen) for g in edge.guards):
            continue
        if edge.trigger is Trigger.TOOLS_DONE and facts.iterations_done >= LIMIT:
            continue
        step = PathStep(source=state.value, trigger=edge.trigger.value, dest=edge.dest.value)
        yield from paths(_next_facts(facts, edge), edge.dest, (*prefix, step))


def visited(path: tuple[PathStep, ...]) -> set[str]:
    return {path[0].source, *(s.dest for s in path)}


RECOVERY_PATHS = {
    recover: list(paths(TurnFacts(durable=True, iteration_limit=LIMIT,
                                  recover_tool_results=recover)))
    for recover in (False, True)
}
DURABLE_PATHS = RECOVERY_PATHS[False] + RECOVERY_PATHS[True]
STATELESS_PATHS = list(paths(TurnFacts(durable=False, iteration_limit=LIMIT)))
PERSISTING_PATHS = [p for p in STATELESS_PATHS if any(s.dest == "persist" for s in p)]
"""The stateless paths through persist (those that could carry a stateless-loop state)."""


def test_the_enumeration_covers_the_table() -> None:
    """Together the enumerated paths take every declared edge (so nothing is skipped)."""
    taken = {(s.source, s.trigger, s.dest) for p in DURABLE_PATHS + STATELESS_PATHS for s in p}
    assert taken == {(e.source.value, e.trigger.value, e.dest.value) for e in TRANSITIONS}
    assert len(DURABLE_PATHS) > 100 and len(STATELESS_PATHS) > 20


def test_guards_keep_stateless_turns_in_the_local_loop() -> None:
    """Step 1: stateless turns never reach cursor or replay; durable ones never local_loop."""
    assert all(not visited(p) & {"cursor", "replay"} for p in STATELESS_PATHS)
    assert all("local_loop" not in visited(p) for p in DURABLE_PATHS)


@given(path=st.sampled_from(PERSISTING_PATHS), state=loop_envelopes())
def test_no_path_persists_a_stateless_loop_state(path: tuple[PathStep, ...],
                                                 state: ContinuationEnvelope) -> None:
    """Step 2: on every path through persist that can carry a stateless-loop state, what
    the store is handed is None."""
    assert PERSISTING_PATHS
    assert state.mode is Mode.STATELESS_LOOP and "local_loop" in visited(path)
    assert decide_turn_persistence(state) is None


def test_an_abort_hands_the_store_no_provider_state() -> None:
    """Step 3: only the commit record has a provider_state field."""
    assert "provider_state" in attrs.fields_dict(TurnCommit)
    assert not any("state" in name for name in attrs.fields_dict(TurnAbort))


RECOVERY_EDGE = ("cursor", "tool_result_cursor_loss", "replay")


def requests(path: tuple[PathStep, ...]) -> int:
    """Provider requests a path makes at most: one per visit of a call state."""
    return sum(1 for step in path if State(step.source) in CALL_STATES)


@pytest.mark.parametrize("recover", [False, True])
def test_recovery_paths(recover: bool) -> None:
    """On every enumerated path, with and without the flag (16,811 paths, checked in
    under a second; drawing 500 of them took ~15 s of CI's run): the recovery edge
    appears only on opted-in paths, at most once, and never after a replay retry; a turn
    makes at most 1 + iterations + 1 requests, and exactly 1 + iterations when the cursor
    is never lost, besides at most ``MAX_RETRIMS`` requests sent again after a refusal as
    too long (table rule 10)."""
    assert RECOVERY_PATHS[recover]
    for path in RECOVERY_PATHS[recover]:
        try:
            check_recovery_rules(recover, path)
        except AssertionError as error:
            steps = " ".join(f"{s.source}-{s.trigger}->{s.dest}" for s in path)
            raise AssertionError(f"recover={recover}: {steps}\n{error}") from error


def check_recovery_rules(recover: bool, path: tuple[PathStep, ...]) -> None:
    """``test_recovery_paths``'s rules on one path."""
    edges = [(s.source, s.trigger, s.dest) for s in path]
    fallbacks = [e for e in edges if e[0] == "cursor" and e[2] == "replay"]
    iterations = sum(1 for e in edges if e[1] == "tools_done")
    retrims = sum(1 for e in edges if e[1] == "context_refused")
    assert len(fallbacks) <= 1
    assert retrims <= MAX_RETRIMS
    assert recover or RECOVERY_EDGE not in edges
    assert requests(path) <= 1 + iterations + 1 + retrims
    if not fallbacks and edges[-1][2] == "done":
        assert requests(path) == 1 + iterations + retrims
    if RECOVERY_EDGE in edges:
        assert iterations >= 1 and edges.index(RECOVERY_EDGE) > edges.index(
            next(e for e in edges if e[1] == "tools_done"))
    lost = [e for e in edges if e[0] == "cursor" and e[1] == "tool_result_cursor_loss"]
    retried = bool(fallbacks) and fallbacks[0] != RECOVERY_EDGE
    if recover and lost and not retried:
        assert lost[0] == RECOVERY_EDGE  # the first loss of an opted-in turn recovers
    if retried:
        assert RECOVERY_EDGE not in edges  # the replay retry was the turn's one extra call
