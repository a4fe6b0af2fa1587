"""The engine: the turn driver on top of core, states, providers and storage.

``TurnEngine.run_turn`` performs each state's action (provider calls through the adapters,
tools, storage writes), turns the outcome into a trigger and fires it on the shared machine.
"""

from turnstate.engine._driver import TurnEngine
from turnstate.engine._limits import TurnLimits
from turnstate.engine._tracing import console_tracing
from turnstate.engine._turn_input import TurnInput

__all__ = ["TurnEngine", "TurnInput", "TurnLimits", "console_tracing"]
