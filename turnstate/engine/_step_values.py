"""What the states' actions yield and end with: ``Fire`` (the trigger next), ``Transition``
(a degradation's write), and the ``Step``, ``Made`` and ``Action`` shapes the drive loop takes
(``_steps`` holds the actions)."""

from __future__ import annotations

from collections.abc import AsyncGenerator

import attrs

from turnstate.core._conversation import TransitionPart
from turnstate.core._events import TurnEvent
from turnstate.states._table import Trigger


@attrs.frozen
class Fire:
    """An action's outcome: the trigger to fire next, with its reason code."""

    trigger: Trigger
    reason: str | None = None


FIRED = {trigger: Fire(trigger, None) for trigger in Trigger}
"""Each trigger's ``Fire`` without a reason: frozen, so one value serves every turn (an
action ends with one or more a turn; issue 26)."""


@attrs.frozen
class Transition:
    """A degradation's write, which the action asks of ``_lifecycle`` (the write's
    outcome is the life's to settle: a lost reply is read back, never sent blind).

    Attributes:
        part: the transition part to append to the turn's in-progress answer.
        clear_provider_state: clear the chat's stored cursor in the same write.
        count: how many transition parts the answer holds once this one landed.
    """

    part: TransitionPart
    clear_provider_state: bool
    count: int


Step = TurnEvent | Fire | Transition | list[TurnEvent]
"""What an action yields: an event, its trigger, a degradation's write, or a list of
events streamed together (a chunk's deltas: the drive loop and the call step are then
resumed once per chunk, not once per event; ``TurnLife.run`` yields them one by one)."""

Made = tuple[tuple[TurnEvent, ...], Fire]
"""The steps of an action that made them all at once, without a write of its own (a
continuation decided without degrading; a commit the store finished without suspending):
its events and its trigger."""

Action = AsyncGenerator[Step, None] | Made
"""A state's action as the drive loop takes it: a generator of its steps, or made at
once (no generator to start, resume and close: issue 26)."""
