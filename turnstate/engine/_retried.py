"""A reused ``TurnInput.turn_id``, answered from the store (issue 20).

``begin_turn`` raises ``TurnAlreadyRecorded`` for an id that names a turn (after its
``ChatBusy`` check, so a retry of a running turn is already ``ChatBusy``). Then: a
completed turn's stored outcome comes back as events (its path, then ``turn_completed``
with its text and finish reason), without a provider call; an aborted one is refused with
``TurnAlreadyRecorded`` naming the turn and its status; another chat's id likewise. One
still in progress past that check has a lease that ran out (its node died): the expired
leases are reclaimed, and it is then an aborted one (``lease_expired``).
``completed_from_store`` is also how a resumed turn's lost final event is rebuilt.
"""

from __future__ import annotations

import contextlib

from turnstate.core._bill import sent_counts
from turnstate.core._conversation import (
    Message,
    ToolCallPart,
    TransitionPart,
    Usage,
    citations_after_tools,
)
from turnstate.core._cost import cost_from_json
from turnstate.core._decisions import Strategy
from turnstate.core._errors import ChatBusy, StorageError, TurnAlreadyRecorded
from turnstate.core._events import (
    FINISH_REASONS,
    StateChanged,
    TurnCompleted,
    TurnEvent,
    TurnStats,
)
from turnstate.core._json import JsonObject
from turnstate.engine._run import text_after_tools
from turnstate.engine._turn_input import TurnInput
from turnstate.storage._protocol import Store, TurnRecord, TurnStatus
from turnstate.storage._records import decode_audit


async def stored_outcome(store: Store, chat_id: str, turn: TurnInput) -> tuple[TurnEvent, ...]:
    """The events of the completed turn ``turn.turn_id`` names; else a typed refusal."""
    turn_id = turn.turn_id or ""
    record = await store.load_turn(turn_id)
    await store.load_chat(chat_id, owner=turn.owner)  # ChatNotFound for another owner
    if record.chat_id != chat_id:
        raise TurnAlreadyRecorded(turn_id)
    if record.status is TurnStatus.IN_PROGRESS and await store.reclaim_expired():
        # the begin found the chat's lease run out (else it was ``ChatBusy``): the turn's
        # node died, and the sweep ends it as a fresh id's begin would have
        record = await store.load_turn(turn_id)
    if record.status is TurnStatus.IN_PROGRESS:
        raise ChatBusy(chat_id, turn_id)
    if record.status is not TurnStatus.COMPLETED:
        raise TurnAlreadyRecorded(turn_id, record.status.value)
    steps = tuple(StateChanged(source=s.source, trigger=s.trigger, dest=s.dest,
                               reason=s.reason) for s in record.path)
    return (*steps, await completed_from_store(store, chat_id, record))


async def completed_from_store(store: Store, chat_id: str, record: TurnRecord) -> TurnCompleted:
    """The ``turn_completed`` event of the committed turn ``record``, as the store holds
    it: the answer's text after its last tool result, the degradation its transition part
    names, the finish reason its audit recorded, the stats its answer stored."""
    answer = await stored_answer(store, chat_id, record)
    parts = answer.parts if answer is not None else ()
    degradation = next((p.reason for p in parts if isinstance(p, TransitionPart)), None)
    finish, raw = stored_finish(answer)
    return TurnCompleted(
        turn_id=record.id, chat_id=chat_id,
        strategy=record.strategy or Strategy.REPLAY.value, degradation=degradation,
        path=record.path, text=text_after_tools(parts), stats=stored_stats(answer),
        finish_reason=finish, finish_reason_raw=raw, citations=citations_after_tools(parts))


async def stored_answer(store: Store, chat_id: str, record: TurnRecord) -> Message | None:
    """The answer message of the turn ``record`` (None once deleted)."""
    messages = await store.list_messages(chat_id)
    return next((m for m in messages if m.seq == record.assistant_seq
                 and m.id == (record.assistant_message_id or m.id)), None)


def stored_stats(answer: Message | None) -> TurnStats:
    """A turn's stats as its answer stored them: the usage column, the audit's ``sent``
    and ``costUsd``, its tool calls; zeros for what the answer does not hold."""
    if answer is None:
        return TurnStats()
    metadata: JsonObject = {}
    if answer.provider_state is not None:
        with contextlib.suppress(StorageError):  # an unreadable audit: zeros
            metadata = decode_audit(answer.provider_state).metadata or {}
    requests, size, retries = sent_counts(metadata)
    return TurnStats(requests=requests, request_bytes=size, retries=retries,
                     tool_calls=sum(isinstance(p, ToolCallPart) for p in answer.parts),
                     usage=answer.usage or Usage(),
                     cost=cost_from_json(metadata.get("costUsd")))


def stored_finish(answer: Message | None) -> tuple[str, str | None]:
    """The finish reason and the provider's own that the answer's audit recorded
    (``finishReason``, ``finishReasonRaw``); ``stop`` and None when there is no readable
    audit (a turn committed before finish reasons were recorded); ``other`` for a stored
    value that is not one of ``FINISH_REASONS``."""
    if answer is None or answer.provider_state is None:
        return "stop", None
    try:
        metadata = decode_audit(answer.provider_state).metadata or {}
    except StorageError:
        return "stop", None
    finish, raw = metadata.get("finishReason", "stop"), metadata.get("finishReasonRaw")
    return (finish if finish in FINISH_REASONS else "other",
            raw if isinstance(raw, str) else None)
