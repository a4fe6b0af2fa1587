"""The one ``transitions.Machine`` of the process, and the checks run when it is built.

The table (``_table.TRANSITIONS``) is declared, validated and drawn through
``transitions``; at run time a turn fires through a dispatch compiled from the very
same edges: a dict from ``(source, trigger)`` to that key's routes in table order,
each route its guards and its destination. ``transitions`` itself keeps every model in
a list, so its ``add_model``/``remove_model`` cost grew with the number of live turns
(6 us idle, 272 us at 10,000, 1.6 ms at 50,000; issue 26) and its ``trigger`` built an
event object, a transition and callback lists per step. ``TurnMachine`` keeps its live
turns in a dict (O(1) to join and leave) and hands them the compiled dispatch; the test
``test_dispatch_agrees_with_transitions`` fires every trigger from every state under
every combination of facts through both and compares the outcomes edge for edge.

No machine is ever built per turn (transitions issues #379 and #434 measured why).
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

Route = tuple[tuple[Guard, ...], State]
"""One edge as the run time reads it: its guards (all must hold) and where it leads."""

Dispatch = Mapping[tuple[str, str], tuple[Route, ...]]
"""``(source, trigger)`` (plain strings) to the routes leaving that way, in table order."""


def compile_dispatch(edges: Iterable[Edge], guards: Mapping[str, Guard] = GUARDS) -> Dispatch:
    """The run-time form of ``edges``: the first route whose guards all hold wins, as
    in ``transitions``, which tries a trigger's transitions in the order declared."""
    routes: dict[tuple[str, str], list[Route]] = {}
    for edge in edges:
        checks = tuple(guards[name] for name in edge.guards)
        routes.setdefault((edge.source.value, edge.trigger.value), []).append(
            (checks, edge.dest))
    return {key: tuple(value) for key, value in routes.items()}


def _route(routes: tuple[Route, ...], facts: TurnFacts) -> State | None:
    for checks, dest in routes:
        for check in checks:
            if not check(facts):
                break
        else:
            return dest
    return None


class TurnModel:
    """The per-turn object the machine drives: its state, its facts, its path.

    ``machine_state`` keeps the state's plain name; ``state`` is the same as a
    ``State``. ``dispatch`` is the compiled table of the machine the model joined.
    """

    machine_state: str = INITIAL.value

    def __init__(self, facts: TurnFacts) -> None:
        self.facts = facts
        self.path: list[PathStep] = []
        self.dispatch: Dispatch = DEFAULT_DISPATCH

    @property
    def state(self) -> State:
        # A dict lookup, not ``State(...)``: the driver reads the state a score of times
        # per turn, and an enum call costs a microsecond or more each (issue 26).
        return STATE_BY_NAME[self.machine_state]

    def trigger(self, trigger_name: str) -> bool:
        """Move along ``trigger_name`` if a route's guards hold; ``transitions``' contract:
        False when every guard fails, ``MachineError`` when no edge leaves that way."""
        routes = self._routes(trigger_name)
        dest = _route(routes, self.facts)
        if dest is None:
            return False
        self.machine_state = dest.value
        return True

    def may_trigger(self, trigger_name: str) -> bool:
        """Whether ``trigger`` would move now (nothing moves, no error)."""
        routes = self.dispatch.get((self.machine_state, trigger_name), ())
        return _route(routes, self.facts) is not None

    def _routes(self, trigger_name: str) -> tuple[Route, ...]:
        routes = self.dispatch.get((self.machine_state, trigger_name))
        if routes is None:
            msg = f"{trigger_name!r} does not leave {self.machine_state!r}"
            raise MachineError(msg)
        return routes

    def destination(self, trigger: Trigger) -> State | None:
        """Where ``trigger`` would lead from here with the current facts, or None.

        Reads the table and fires nothing: the driver asks it when an action must do
        something before the trigger that depends on where the trigger goes.
        """
        return _route(self.dispatch.get((self.machine_state, trigger.value), ()), self.facts)

    def fire(self, trigger: Trigger, reason: str | None = None) -> State:
        """Fire ``trigger``, record the step in ``path`` and return the new state.

        Raises:
            TransitionRefused: no edge for ``trigger`` leaves the current state with
                its guards satisfied.
        """
        # ``_value_``: the member's plain string, read as an attribute (``.value`` is a
        # descriptor call, several times slower on 3.11, and a turn fires 3 or more).
        name, source = trigger._value_, self.machine_state
        dest = _route(self.dispatch.get((source, name), ()), self.facts)
        if dest is None:
            raise TransitionRefused(source, name)
        self.machine_state = target = dest._value_
        self.path.append(edge_step(source, name, target, reason))
        return dest


_STEPS: dict[tuple[str, str, str, str | None], PathStep] = {}
"""Each fired edge's ``PathStep`` by its fields: frozen, so one value serves every turn
that takes the edge with that reason (at most ``_STEPS_KEPT``; a reason is a code)."""
_STEPS_KEPT = 1024


def edge_step(source: str, trigger: str, dest: str, reason: str | None) -> PathStep:
    """``PathStep(source=..., trigger=..., dest=..., reason=...)``, made once per edge and
    reason (attrs' frozen ``__init__`` per fired edge cost more than the lookup)."""
    key = (source, trigger, dest, reason)
    step = _STEPS.get(key)
    if step is None:
        step = PathStep(source=source, trigger=trigger, dest=dest, reason=reason)
        if len(_STEPS) < _STEPS_KEPT:
            _STEPS[key] = step
    return step


class TurnMachine(Machine):
    """A ``Machine`` whose turns fire through ``dispatch`` and join and leave in O(1).

    ``transitions`` builds the machine from the table (and so checks the states and
    triggers it names) and draws it; its models list is replaced by a dict of the live
    turns, and nothing is bound onto a model but its state and ``routes``, the compiled
    dispatch (``Machine.dispatch`` is a method of ``transitions``' own).
    """

    def __init__(self, *args: Any, routes: Dispatch, **kwargs: Any) -> None:
        self.routes = routes
        self._live: dict[int, TurnModel] = {}
        super().__init__(*args, **kwargs)

    @property
    def models(self) -> list[Any]:
        """The live turns (a copy)."""
        return list(self._live.values())

    @models.setter
    def models(self, value: list[Any]) -> None:
        self._live = {id(model): model for model in value}

    def add_model(self, model: Any, initial: Any = None) -> None:
        start = str(initial or self.initial)
        if type(model) is TurnModel:  # the engine's call, once a turn: no list built
            self._join(model, start)
            return
        for turn in model if isinstance(model, list) else [model]:
            if not isinstance(turn, TurnModel):
                msg = f"a TurnMachine drives TurnModels, not {type(turn).__name__}"
                raise TypeError(msg)
            self._join(turn, start)

    def _join(self, turn: TurnModel, start: str) -> None:
        turn.machine_state = start
        turn.dispatch = self.routes
        self._live[id(turn)] = turn

    def remove_model(self, model: Any) -> None:
        if type(model) is TurnModel:  # the engine's call, once a turn: no list built
            self._live.pop(id(model), None)
            return
        for turn in model if isinstance(model, list) else [model]:
            self._live.pop(id(turn), None)


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
        routes=compile_dispatch(edges, guards),
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


DEFAULT_DISPATCH: Dispatch = compile_dispatch(TRANSITIONS)
"""The shipped table's dispatch: what a model fires through until a machine adopts it."""

STATE_BY_NAME: Mapping[str, State] = {state.value: state for state in State}
"""Each state by its plain name (``TurnModel.machine_state``): a dict lookup, not an
enum call."""
