"""The run-time dispatch agrees with the declared table, and turns join and leave the
shared machine in constant time (issue 26)."""

from __future__ import annotations

import itertools
import time
from typing import Any

import pytest
from transitions import Machine, MachineError

from turnstate.core._errors import TransitionRefused
from turnstate.states import (
    INITIAL,
    TRANSITIONS,
    State,
    Trigger,
    TurnFacts,
    TurnModel,
    machine_config,
    shared_machine,
)
from turnstate.states._machine import compile_dispatch


class PlainModel:
    """A model of an unmodified ``transitions.Machine``: what the table means there."""

    def __init__(self, facts: TurnFacts) -> None:
        self.facts = facts


def reference_machine() -> Machine:
    """The table as plain ``transitions`` runs it, with no turnstate dispatch in it."""
    return Machine(model=None, states=[s.value for s in State], initial=INITIAL.value,
                   model_attribute="state", transitions=machine_config(TRANSITIONS),
                   auto_transitions=False, send_event=True, ignore_invalid_triggers=False)


def all_facts() -> list[TurnFacts]:
    flags = itertools.product((False, True), repeat=5)
    return [TurnFacts(durable=d, tool_results_in_flight=f, replay_retry_used=u,
                      recover_tool_results=r, iterations_done=done, iteration_limit=2,
                      lease_held=h)
            for d, f, u, r, h in flags for done in (1, 2, 3)]


def reference_outcome(machine: Machine, state: State, trigger: Trigger,
                      facts: TurnFacts) -> str | None:
    model: Any = PlainModel(facts)
    machine.add_model(model, initial=state.value)
    try:
        moved = model.trigger(trigger.value)
    except MachineError:
        return None
    finally:
        machine.remove_model(model)
    return str(model.state) if moved else None


def dispatched_outcome(state: State, trigger: Trigger, facts: TurnFacts) -> str | None:
    model = TurnModel(facts)
    shared_machine().add_model(model, initial=state.value)
    try:
        return model.fire(trigger).value
    except TransitionRefused:
        assert model.state is state and model.path == []
        return None
    finally:
        shared_machine().remove_model(model)


def test_dispatch_agrees_with_transitions() -> None:
    """Every trigger from every state under every combination of facts (4 flags, three
    iteration counts around the limit) goes to the same place, or is refused alike,
    through the compiled dispatch and through plain ``transitions`` built from the same
    table; and every declared edge is taken at least once along the way."""
    reference = reference_machine()
    taken: set[tuple[str, str, str]] = set()
    for state, trigger, facts in itertools.product(State, Trigger, all_facts()):
        expected = reference_outcome(reference, state, trigger, facts)
        assert dispatched_outcome(state, trigger, facts) == expected, (state, trigger, facts)
        if expected is not None:
            taken.add((state.value, trigger.value, expected))
    declared = {(e.source.value, e.trigger.value, e.dest.value) for e in TRANSITIONS}
    assert taken == declared


def test_dispatch_holds_the_declared_edges_in_order() -> None:
    """The compiled routes are the table's edges, key by key, in the order
    ``transitions`` holds them (the first route whose guards hold wins in both)."""
    reference = reference_machine()
    dispatch = compile_dispatch(TRANSITIONS)
    for (source, trigger), routes in dispatch.items():
        declared = reference.events[trigger].transitions[source]
        assert [(t.dest, [c.func.__name__ for c in t.conditions]) for t in declared] == [
            (dest.value, [check.__name__ for check in checks]) for checks, dest in routes]
    pairs = {(e.source.value, e.trigger.value) for e in TRANSITIONS}
    assert set(dispatch) == pairs


def test_trigger_and_may_trigger_keep_the_transitions_contract() -> None:
    """``trigger`` raises MachineError where no edge leaves, returns False when the
    guards fail; ``may_trigger`` never moves."""
    model = TurnModel(TurnFacts(durable=False))
    with pytest.raises(MachineError):
        model.trigger(Trigger.COMMITTED.value)
    assert not model.may_trigger(Trigger.CONTINUE_WITH_CURSOR.value)
    assert not model.trigger(Trigger.CONTINUE_WITH_CURSOR.value)
    assert model.may_trigger(Trigger.NO_STORED_STATE.value)
    assert model.state is State.VALIDATE
    assert model.trigger(Trigger.NO_STORED_STATE.value)
    assert model.state is State.LOCAL_LOOP


def test_the_machine_drives_only_turn_models() -> None:
    """A foreign model is a TypeError, not a silently undriven object."""
    with pytest.raises(TypeError):
        shared_machine().add_model(PlainModel(TurnFacts(durable=True)))


def _join_and_leave(turns: int) -> int:
    machine, best = shared_machine(), 10**12
    for _ in range(5):
        start = time.perf_counter_ns()
        for _ in range(turns):
            model = TurnModel(TurnFacts(durable=True))
            machine.add_model(model)
            machine.remove_model(model)
        best = min(best, time.perf_counter_ns() - start)
    return best


def test_joining_and_leaving_does_not_grow_with_live_turns() -> None:
    """With 20,000 turns live, joining and leaving costs what it costs idle (within 5x;
    the list ``transitions`` keeps made it ~100x at 10,000), and the live turns are
    exactly those that joined and have not left."""
    machine = shared_machine()
    idle = _join_and_leave(500)
    live = [TurnModel(TurnFacts(durable=True)) for _ in range(20_000)]
    machine.add_model(live)
    try:
        assert len(machine.models) == 20_000
        assert _join_and_leave(500) < 5 * idle
    finally:
        machine.remove_model(live)
    assert machine.models == []


def test_one_turn_or_a_list_joins_in_the_initial_state_and_leaves() -> None:
    """The engine's add and remove of one turn (no list built) and the list path agree:
    each turn joins in the initial state with the compiled dispatch, and leaves."""
    machine = shared_machine()
    one, *several = (TurnModel(TurnFacts(durable=True)) for _ in range(3))
    machine.add_model(one)
    machine.add_model(several)
    try:
        for model in (one, *several):
            assert model.state is State.VALIDATE and model in machine.models
            assert model.dispatch is machine.routes
    finally:
        machine.remove_model(one)
        machine.remove_model(several)
    assert not {id(m) for m in (one, *several)} & {id(m) for m in machine.models}
    with pytest.raises(TypeError, match="drives TurnModels"):
        machine.add_model([object()])
