"""How a turn ends when the node running it asks: ``stopped`` or ``cancelled``, with events.

A consumer that goes away cancels a turn and gets nothing more (``_lifecycle``). A
detached turn (``_detached``) is ended by its runner instead: a user's stop, or the
server's shutdown. The runner marks the turn in ``TurnEngine.endings`` and cancels the
task iterating it; the turn's life then ends it here and still yields its last state
changes and final event, so every follower of the turn gets a proper ending.
A turn its consumer iterates (``run_turn``) is stopped by ``TurnEngine.stop`` through
its ``LeaseKeeper`` (``ask_stop``: the turn's own code is cancelled, never the
consumer's), and ends here the same way: its loop gets the last events.

A stop only ends a turn in a stoppable state (``STOPPABLE_STATES``): in ``persist`` the
commit already sent decides, so a stop racing the commit ends as exactly one outcome.
A stopped turn's abort keeps the text streamed so far (``TurnRun.abort_record``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from turnstate.core._events import StateChanged, TurnEvent
from turnstate.engine._run import TurnRun
from turnstate.engine._steps import final_event
from turnstate.states._table import STOPPABLE_STATES, Trigger
from turnstate.storage._protocol import TurnAbort

STOPPED_DETAIL = "stopped on request"


async def end_on_request(run: TurnRun, trigger: Trigger, *,
                         cancel: Callable[[], Awaitable[None]],
                         record: Callable[[TurnAbort], Awaitable[None]]) -> tuple[TurnEvent, ...]:
    """End ``run`` with ``trigger`` (``stopped``, else as ``cancel`` does); its last events.

    ``record`` records an abort (with the life's retries), ``cancel`` ends a cancelled turn.
    """
    before = len(run.machine_model.path)
    if trigger is Trigger.STOPPED and run.current in STOPPABLE_STATES:
        run.machine_model.fire(Trigger.STOPPED, Trigger.STOPPED.value)
        run.abort_detail = STOPPED_DETAIL
        await record(run.abort_record(Trigger.STOPPED.value))
        run.machine_model.fire(Trigger.ABORT_RECORDED)
    else:
        await cancel()
    changes = tuple(StateChanged(source=s.source, trigger=s.trigger, dest=s.dest,
                                 reason=s.reason) for s in run.machine_model.path[before:])
    return (*changes, final_event(run))
