"""A stop asked while the store is away, of a detached turn running on this node
(lifecycle11, after ops10): it takes effect here at once, and the stop request is written
once the store returns.

``DetachedTurns.stop`` records a stop in the store first, so that the node running the
turn learns it wherever it runs; with the store away for a moment (a restart) that
write failed, and the stop was refused (the server's ``503``) even for a turn running on
the node that was asked. Now, for such a turn (running here, of the chat and owner
named), the stop ends it at once (``stopped``, its abort written as the store returns,
within its lease), ``stop_written`` writes the request in the background, retried with
backoff while the store is away for at most ``lease_seconds`` (other nodes following the
turn, and the turn's record, learn of it then), and ``stop`` returns the turn's record
as this node holds it (``local_record``). A stop of a turn running elsewhere still needs
the store, and is refused as before.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta

from turnstate.core._errors import StorageError
from turnstate.core._errors_storage import STORAGE_OUTAGES
from turnstate.engine._lease import LeaseKeeper
from turnstate.engine._live import LiveTurn
from turnstate.engine._patience import delay_of
from turnstate.storage._protocol import TurnRecord, TurnStatus
from turnstate.storage._turn_log import TurnLog

logger = logging.getLogger("turnstate")


def stoppable_here(live: LiveTurn, chat_id: str | None, owner: str | None) -> bool:
    """Whether a stop of ``live`` (running here) may take effect without the store: not
    ended, of ``chat_id`` when one is named, and its ``TurnInput`` named ``owner`` when
    one is asked for (a turn that named none has its owner checked on the chat's record
    only: the store's)."""
    return (not live.done and (chat_id is None or live.chat_id == chat_id)
            and (owner is None or live.owner == owner))


def local_record(live: LiveTurn, keeper: LeaseKeeper) -> TurnRecord:
    """The turn's record as this node holds it: running, its provider and model as its
    ``TurnInput`` named them, its seqs and answer's id from its lease, its start as its
    lease's first expiry less the lease."""
    lease = keeper.lease
    return TurnRecord(id=live.turn_id, chat_id=live.chat_id, status=TurnStatus.IN_PROGRESS,
                      provider=live.provider, model=live.model, user_seq=lease.user_seq,
                      assistant_seq=lease.assistant_seq,
                      started_at=lease.expires_at - timedelta(seconds=keeper.lease_seconds),
                      assistant_message_id=lease.assistant_message_id)


async def stop_written(log: TurnLog, live: LiveTurn, owner: str | None,
                       seconds: float) -> None:
    """Write the stop request of ``live`` once the store returns: retried with backoff
    while it is away, for at most ``seconds``; any other refusal (the turn or its chat
    deleted) ends it."""
    loop = asyncio.get_running_loop()
    until, attempt = loop.time() + seconds, 0
    while True:
        delay = delay_of(attempt)  # the back-off of a turn's own store calls
        try:
            await log.request_stop(live.chat_id, live.turn_id, owner=owner)
            return
        except STORAGE_OUTAGES as exc:
            if loop.time() + delay >= until:
                logger.warning("[turn-log] turn %s: its stop request could not be written "
                               "(%s); the turn was stopped here", live.turn_id, exc)
                return
        except StorageError as exc:
            logger.info("[turn-log] turn %s: its stop request was refused: %s",
                        live.turn_id, exc)
            return
        await asyncio.sleep(delay)
        attempt += 1
