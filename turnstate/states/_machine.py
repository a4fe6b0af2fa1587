"""The one ``transitions.Machine`` of the process, and the checks run when it is built.

Turns join the shared machine with ``add_model`` and leave it with ``remove_model``;
no machine is ever built per turn (transitions issues #379 and #434 measured why).
The machine binds only ``trigger`` and ``may_trigger`` onto a model: the per-trigger
convenience methods are a typing blind spot and made ``add_model`` cost hundreds of
microseconds per turn.
"""

from __future__ import annotations

import functools
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from transitions import EventData, Machine, MachineError

from turnstate.core._errors import InvalidDefinition, TransitionRefused
from turnstate.core._path import PathStep
from turnstate.states._guards import GUARDS, Guard, TurnFacts
from turnstate.states._table import FINAL_STATES, INITIAL, TRANSITIONS, Edge, State, Trigger


class TurnModel:
    """The per-turn object the machine drives: its state, its facts, its path.

    The machine keeps the state's plain name in ``machine_state`` (string state names
    keep ``transitions``' bookkeeping cheap); ``state`` is the same as a ``State``.
    """

    machine_state: str

    def __init__(self, facts: TurnFacts) -> None:
        self.facts = facts
        self.path: list[PathStep] = []

    @property
    def state(self) -> State:
        return State(self.machine_state)

    def trigger(self, trigger_name: str, *args: Any, **kwargs: Any) -> bool:
        """Bound by the machine on ``add_model``."""
        raise NotImplementedError

    def may_trigger(self, trigger_name: str, *args: Any, **kwargs: Any) -> bool:
        """Bound by the machine on ``add_model``."""
        raise NotImplementedError

    def destination(self, trigger: Trigger, edges: Sequence[Edge] = TRANSITIONS) -> State | None:
        """Where ``trigger`` would lead from here with the current facts, or None.

        Reads the table and fires nothing: the driver asks it when an action must do
        something before the trigger that depends on where the trigger goes.
        """
        source = self.state
        for edge in edges:
            if edge.source is source and edge.trigger is trigger \
                    and all(GUARDS[name](self.facts) for name in edge.guards):
                return edge.dest
        return None

    def fire(self, trigger: Trigger, reason: str | None = None) -> State:
        """Fire ``trigger``, record the step in ``path`` and return the new state.

        Raises:
            TransitionRefused: no edge for ``trigger`` leaves the current state with
                its guards satisfied.
        """
        source = self.machine_state
        try:
            moved = self.trigger(trigger.value)
        except (AttributeError, MachineError) as exc:
            raise TransitionRefused(source, trigger.value) from exc
        if not moved:
            raise TransitionRefused(source, trigger.value)
        self.path.append(PathStep(source=source, trigger=trigger.value,
                                  dest=self.machine_state, reason=reason))
        return self.state


class TurnMachine(Machine):
    """A ``Machine`` that binds only ``trigger`` and ``may_trigger`` onto its models."""

    BOUND_NAMES = frozenset({"trigger", "may_trigger"})

    def _checked_assignment(self, model: Any, name: str, func: Any) -> None:
        if name in self.BOUND_NAMES:
            setattr(model, name, func)

    def _add_trigger_to_model(self, trigger: str, model: Any) -> None:
        """No per-trigger methods: models fire through ``trigger(name)``."""

    def _add_model_to_state(self, state: Any, model: Any) -> None:
        """No ``is_<state>`` helpers and no name-resolved ``on_enter_*`` callbacks."""


def _condition(guard: Guard) -> Any:
    def check(event: EventData) -> bool:
        model: TurnModel = event.model  # type: ignore[assignment]
        return guard(model.facts)

    check.__name__ = guard.__name__
    return check


def _reachable(edges: Sequence[Edge], start: State) -> set[State]:
    seen, queue = {start}, deque([start])
    while queue:
        state = queue.popleft()
        for edge in edges:
            if edge.source is state and edge.dest not in seen:
                seen.add(edge.dest)
                queue.append(edge.dest)
    return seen


def definition_problems(
    edges: Sequence[Edge], guards: Mapping[str, Guard] = GUARDS
) -> list[str]:
    """Everything wrong with a transition table (an empty list means none)."""
    problems: list[str] = []
    reachable = _reachable(edges, INITIAL)
    problems += [f"state {s} is unreachable from {INITIAL}" for s in State if s not in reachable]
    sources = {edge.source for edge in edges}
    problems += [
        f"state {s} has no way out" for s in State if s not in FINAL_STATES and s not in sources
    ]
    problems += [f"final state {s} has an outgoing edge" for s in FINAL_STATES if s in sources]
    for state in State:
        if state not in FINAL_STATES and not (_reachable(edges, state) & FINAL_STATES):
            problems.append(f"no path from {state} ends in done or aborted")
    for edge in edges:
        problems += [
            f"guard {name!r} of {edge.trigger} from {edge.source} does not resolve"
            for name in edge.guards if name not in guards
        ]
    seen: set[tuple[Trigger, State, tuple[str, ...]]] = set()
    for edge in edges:
        key = (edge.trigger, edge.source, edge.guards)
        if key in seen:
            problems.append(f"duplicate edge {edge.trigger} from {edge.source}")
        seen.add(key)
    unused = set(Trigger) - {edge.trigger for edge in edges}
    problems += [f"trigger {t} is declared but never used" for t in sorted(unused)]
    return problems


def machine_config(
    edges: Iterable[Edge], guards: Mapping[str, Guard] = GUARDS
) -> list[dict[str, Any]]:
    """The table in ``transitions``' own configuration shape."""
    return [
        {
            "trigger": edge.trigger.value,
            "source": edge.source.value,
            "dest": edge.dest.value,
            "conditions": [_condition(guards[name]) for name in edge.guards],
        }
        for edge in edges
    ]


def build_machine(
    edges: Sequence[Edge] = TRANSITIONS, guards: Mapping[str, Guard] = GUARDS
) -> Machine:
    """Check ``edges`` and build a machine from them.

    Raises:
        InvalidDefinition: the table breaks a rule (see ``definition_problems``).
    """
    problems = definition_problems(edges, guards)
    if problems:
        raise InvalidDefinition(problems)
    return TurnMachine(
        model=None,
        states=[state.value for state in State],
        initial=INITIAL.value,
        model_attribute="machine_state",
        transitions=machine_config(edges, guards),
        auto_transitions=False,
        send_event=True,
        ignore_invalid_triggers=False,
    )


@functools.cache
def shared_machine() -> Machine:
    """The process's machine, built (and checked) on first use."""
    return build_machine()
