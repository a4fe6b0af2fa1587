"""The turn state machine as data: states, triggers, the table, guards, the factory."""

from turnstate.core._path import PathStep
from turnstate.states._guards import GUARDS, TurnFacts
from turnstate.states._machine import (
    TurnModel,
    build_machine,
    definition_problems,
    machine_config,
    shared_machine,
)
from turnstate.states._table import (
    CALL_STATES,
    DEGRADATION_TRIGGERS,
    FINAL_STATES,
    INITIAL,
    TRANSITIONS,
    Edge,
    State,
    Trigger,
)

__all__ = [
    "CALL_STATES",
    "DEGRADATION_TRIGGERS",
    "FINAL_STATES",
    "GUARDS",
    "INITIAL",
    "TRANSITIONS",
    "Edge",
    "PathStep",
    "State",
    "Trigger",
    "TurnFacts",
    "TurnModel",
    "build_machine",
    "definition_problems",
    "machine_config",
    "shared_machine",
]
