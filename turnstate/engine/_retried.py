"""A reused ``TurnInput.turn_id``, answered from the store (issue 20).

``begin_turn`` raises ``TurnAlreadyRecorded`` for an id that names a turn (after its
``ChatBusy`` check, so a retry of a running turn is already ``ChatBusy``). Then: a
completed turn's stored outcome comes back as events (its path, then ``turn_completed``
with its text), without a provider call; an aborted one is refused with
``TurnAlreadyRecorded`` naming the turn and its status; another chat's id likewise.
"""

from __future__ import annotations

from turnstate.core._conversation import TransitionPart
from turnstate.core._decisions import Strategy
from turnstate.core._errors import ChatBusy, TurnAlreadyRecorded
from turnstate.core._events import StateChanged, TurnCompleted, TurnEvent, TurnStats
from turnstate.engine._run import TurnInput, text_after_tools
from turnstate.storage._protocol import Store, TurnStatus


async def stored_outcome(store: Store, chat_id: str, turn: TurnInput) -> tuple[TurnEvent, ...]:
    """The events of the completed turn ``turn.turn_id`` names; else a typed refusal."""
    turn_id = turn.turn_id or ""
    record = await store.load_turn(turn_id)
    await store.load_chat(chat_id, owner=turn.owner)  # ChatNotFound for another owner
    if record.chat_id != chat_id:
        raise TurnAlreadyRecorded(turn_id)
    if record.status is TurnStatus.IN_PROGRESS:
        raise ChatBusy(chat_id, turn_id)
    if record.status is not TurnStatus.COMPLETED:
        raise TurnAlreadyRecorded(turn_id, record.status.value)
    messages = await store.list_messages(chat_id)
    parts = next((m.parts for m in messages if m.seq == record.assistant_seq), ())
    degradation = next((p.reason for p in parts if isinstance(p, TransitionPart)), None)
    steps = tuple(StateChanged(source=s.source, trigger=s.trigger, dest=s.dest,
                               reason=s.reason) for s in record.path)
    return (*steps, TurnCompleted(
        turn_id=turn_id, chat_id=chat_id,
        strategy=record.strategy or Strategy.REPLAY.value, degradation=degradation,
        path=record.path, text=text_after_tools(parts), stats=TurnStats()))
