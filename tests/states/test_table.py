"""The transition table and the machine built from it."""

from __future__ import annotations

import pytest

from turnstate.core import InvalidDefinition
from turnstate.core._errors import TransitionRefused
from turnstate.states import (
    DEGRADATION_TRIGGERS,
    FINAL_STATES,
    GUARDS,
    TRANSITIONS,
    Edge,
    State,
    Trigger,
    TurnFacts,
    TurnModel,
    build_machine,
    definition_problems,
    shared_machine,
)
from turnstate.states._guards import MAX_RETRIMS


def edges_from(source: State) -> set[tuple[str, str]]:
    return {(e.trigger.value, e.dest.value) for e in TRANSITIONS if e.source is source}


def test_the_table_is_valid() -> None:
    """The shipped table passes every definition check."""
    assert definition_problems(TRANSITIONS) == []


def test_every_degradation_reason_leads_from_validate_to_replay() -> None:
    """One trigger per degradation reason goes validate → replay (durable providers)."""
    out = edges_from(State.VALIDATE)
    assert {(t.value, "replay") for t in DEGRADATION_TRIGGERS} <= out
    assert ("provider_changed", "local_loop") in out
    assert ("continue_with_cursor", "cursor") in out
    assert {("no_stored_state", "replay"), ("no_stored_state", "local_loop")} <= out


def test_cursor_loss_edges() -> None:
    """Provider-reported cursor loss replays without results in flight, aborts with them."""
    cursor = {e.trigger: e for e in TRANSITIONS if e.source is State.CURSOR
              and e.trigger in (Trigger.CURSOR_EXPIRED, Trigger.CURSOR_INVALID,
                                Trigger.TOOL_RESULT_CURSOR_LOSS)}
    assert cursor[Trigger.CURSOR_EXPIRED].dest is State.REPLAY
    assert "no_tool_results_in_flight" in cursor[Trigger.CURSOR_EXPIRED].guards
    loss = {e.dest: e.guards for e in TRANSITIONS if e.source is State.CURSOR
            and e.trigger is Trigger.TOOL_RESULT_CURSOR_LOSS}
    assert loss[State.ABORT] == ("tool_results_in_flight", "recovery_unavailable")


def test_context_overflow_edges() -> None:
    """``context_overflow`` is a degradation out of ``validate`` (critical snapshot) and a
    cursor loss out of ``cursor`` (the provider refused the conversation's length), both
    into ``replay``; out of ``replay`` / ``local_loop`` it still aborts (the history does
    not fit). With tool results in flight the cursor edge is closed (the driver fires
    ``tool_result_cursor_loss``), and once the replay retry is spent too."""
    overflow = Trigger.CONTEXT_OVERFLOW
    assert overflow in DEGRADATION_TRIGGERS
    assert {(e.source, e.dest, e.guards) for e in TRANSITIONS if e.trigger is overflow} == {
        (State.VALIDATE, State.REPLAY, ("is_durable",)),
        (State.CURSOR, State.REPLAY, ("no_tool_results_in_flight", "replay_retry_available")),
        (State.REPLAY, State.ABORT, ()),
        (State.LOCAL_LOOP, State.ABORT, ()),
    }
    for in_flight, retried, dest in ((False, False, State.REPLAY), (True, False, None),
                                     (False, True, None)):
        model = TurnModel(TurnFacts(durable=True, tool_results_in_flight=in_flight,
                                    replay_retry_used=retried))
        model.machine_state = State.CURSOR.value
        assert model.destination(overflow) is dest, (in_flight, retried)


def test_recovery_edges() -> None:
    """Opted-in turns recover in-flight results by replay, once; a failed recovery replay
    aborts with tool_result_cursor_loss. The guards pick exactly one destination."""
    loss = Trigger.TOOL_RESULT_CURSOR_LOSS
    assert {(e.source, e.dest, e.guards) for e in TRANSITIONS if e.trigger is loss} == {
        (State.CURSOR, State.ABORT, ("tool_results_in_flight", "recovery_unavailable")),
        (State.CURSOR, State.REPLAY,
         ("tool_results_in_flight", "recovery_enabled", "replay_retry_available")),
        (State.REPLAY, State.ABORT, ("tool_results_in_flight",)),
    }
    cases = {(False, False): State.ABORT, (True, False): State.REPLAY,
             (True, True): State.ABORT, (False, True): State.ABORT}
    for (recover, retried), dest in cases.items():
        model = TurnModel(TurnFacts(durable=True, tool_results_in_flight=True,
                                    recover_tool_results=recover, replay_retry_used=retried))
        model.machine_state = State.CURSOR.value
        assert model.destination(loss) is dest, (recover, retried)
    idle = TurnModel(TurnFacts(durable=True, recover_tool_results=True))
    idle.machine_state = State.CURSOR.value
    assert idle.destination(loss) is None


def test_every_call_state_has_the_same_exits() -> None:
    """cursor, replay and local_loop all go to tool_iteration, persist and abort."""
    common = {("tool_calls", "tool_iteration"), ("completed", "persist"),
              ("provider_failed", "abort"), ("cancelled", "abort")}
    for state in (State.CURSOR, State.REPLAY, State.LOCAL_LOOP):
        assert common <= edges_from(state)


def test_final_states_have_no_exits() -> None:
    """done and aborted are final."""
    assert all(e.source not in FINAL_STATES for e in TRANSITIONS)


def test_guards_are_named_pure_functions() -> None:
    """Every guard in the table resolves to a function of TurnFacts returning a bool."""
    facts = TurnFacts(durable=True)
    for edge in TRANSITIONS:
        for name in edge.guards:
            assert GUARDS[name].__name__ == name
            assert isinstance(GUARDS[name](facts), bool)


@pytest.mark.parametrize(
    ("broken", "problem"),
    [
        (tuple(e for e in TRANSITIONS if e.dest is not State.LOCAL_LOOP),
         "local_loop is unreachable"),
        (tuple(e for e in TRANSITIONS if e.source is not State.PERSIST), "no way out"),
        ((*TRANSITIONS, Edge(Trigger.CANCELLED, State.DONE, State.ABORT)),
         "final state done has an outgoing edge"),
        ((*TRANSITIONS, Edge(Trigger.COMPLETED, State.VALIDATE, State.PERSIST,
                             ("no_such_guard",))), "does not resolve"),
        ((*TRANSITIONS, TRANSITIONS[0]), "duplicate edge"),
        (tuple(e for e in TRANSITIONS if e.trigger is not Trigger.ABORT_RECORDED),
         "no path from abort ends in done or aborted"),
        (tuple(e for e in TRANSITIONS if e.trigger is not Trigger.COMMIT_FAILED),
         "declared but never used"),
    ],
)
def test_a_broken_table_raises_invalid_definition(broken: tuple[Edge, ...], problem: str) -> None:
    """Each definition rule is checked when a machine is built."""
    with pytest.raises(InvalidDefinition) as info:
        build_machine(broken)
    assert any(problem in p for p in info.value.problems), info.value.problems


def test_a_cycle_with_no_exit_is_found() -> None:
    """A loop that can never reach a final state is reported."""
    loop = {State.CURSOR, State.TOOL_ITERATION}
    trapped = (*(e for e in TRANSITIONS if e.source not in loop),
               Edge(Trigger.TOOL_CALLS, State.CURSOR, State.TOOL_ITERATION),
               Edge(Trigger.TOOLS_DONE, State.TOOL_ITERATION, State.CURSOR))
    problems = definition_problems(trapped)
    assert "no path from cursor ends in done or aborted" in problems
    assert "no path from tool_iteration ends in done or aborted" in problems
    assert not any("has no way out" in p for p in problems)


def test_the_shared_machine_is_built_once() -> None:
    """shared_machine returns the same Machine every time."""
    assert shared_machine() is shared_machine()


def test_triggers_outside_the_table_are_refused() -> None:
    """A trigger with no edge from the current state raises TransitionRefused, and so
    does one whose guards fail; the model's state is unchanged."""
    machine = shared_machine()
    model = TurnModel(TurnFacts(durable=False))
    machine.add_model(model)
    try:
        with pytest.raises(TransitionRefused):
            model.fire(Trigger.COMMITTED)
        with pytest.raises(TransitionRefused):
            model.fire(Trigger.CONTINUE_WITH_CURSOR)  # guarded by is_durable
        assert model.state is State.VALIDATE and model.path == []
        model.fire(Trigger.NO_STORED_STATE)
        assert model.state is State.LOCAL_LOOP
    finally:
        machine.remove_model(model)


def test_the_iteration_guards_are_complementary() -> None:
    """At the limit, tools_done is refused and tool_iteration_limit allowed."""
    machine = shared_machine()
    model = TurnModel(TurnFacts(durable=True, iterations_done=3, iteration_limit=2))
    machine.add_model(model, initial=State.TOOL_ITERATION.value)
    try:
        with pytest.raises(TransitionRefused):
            model.fire(Trigger.TOOLS_DONE)
        assert model.fire(Trigger.TOOL_ITERATION_LIMIT) is State.ABORT
    finally:
        machine.remove_model(model)


def test_every_working_state_has_a_guarded_lease_lost_edge() -> None:
    """Issue 20: a turn that lost its lease stops from every state that does work (the
    commit included: a refused commit whose lease is gone), through one ``lease_lost``
    edge guarded by ``lease_not_held``; only the abort, which records it, has none."""
    working = {State.VALIDATE, State.CURSOR, State.REPLAY, State.LOCAL_LOOP,
               State.TOOL_ITERATION, State.PERSIST}
    assert working == set(State) - FINAL_STATES - {State.ABORT}
    edges = [e for e in TRANSITIONS if e.trigger is Trigger.LEASE_LOST]
    assert {e.source for e in edges} == working and len(edges) == len(working)
    assert all(e.dest is State.ABORT and e.guards == ("lease_not_held",) for e in edges)
    held, lost = (TurnFacts(durable=True, lease_held=flag) for flag in (True, False))
    assert not GUARDS["lease_not_held"](held) and GUARDS["lease_not_held"](lost)


def test_context_refused_edges() -> None:
    """A replay or local loop the provider refused as too long loops back to itself
    (sent again, trimmed more; rule 10), at most ``MAX_RETRIMS`` times a turn; nothing
    else takes ``context_refused``."""
    refused = Trigger.CONTEXT_REFUSED
    assert {(e.source, e.dest, e.guards) for e in TRANSITIONS if e.trigger is refused} == {
        (State.REPLAY, State.REPLAY, ("retrim_available",)),
        (State.LOCAL_LOOP, State.LOCAL_LOOP, ("retrim_available",)),
    }
    for state, durable in ((State.REPLAY, True), (State.LOCAL_LOOP, False)):
        for done in range(MAX_RETRIMS + 1):
            model = TurnModel(TurnFacts(durable=durable, retrims_done=done))
            model.machine_state = state.value
            expected = state if done < MAX_RETRIMS else None
            assert model.destination(refused) is expected, (state, done)
