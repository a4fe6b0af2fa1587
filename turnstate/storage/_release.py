"""``release_chat``: an operator frees a stuck chat (``turnstate release DB CHAT_ID``).

The chat's running turn is recorded ``aborted`` with reason ``released`` and the lease is
freed, whether or not it has expired. Safe against the turn itself: the abort only marks
what is still in progress and frees the chat only while that turn holds it, so a turn
that committed meanwhile is left as it is; a turn still running is told at once where
the store can tell it (``announce_fenced``: this process, and PostgreSQL's other nodes by
notification), else finds its next renewal and every fenced write refused, and ends
``lease_lost`` without another side effect.
"""

from __future__ import annotations

from turnstate.core._errors import TurnNotFound
from turnstate.storage._fence_signal import announce_fenced
from turnstate.storage._protocol import Store, TurnAbort, TurnLease, TurnRecord
from turnstate.storage._records import message_ids

RELEASED = "released"
"""The abort reason of a turn an operator released."""


async def release_chat(store: Store, chat_id: str, *, owner: str | None = None,
                       detail: str = "released by an operator") -> TurnRecord | None:
    """Abort the chat's running turn as ``released`` and free its lease.

    Returns the released turn as recorded afterwards, or None when no turn held the chat.

    Raises:
        ChatNotFound: no such chat (or another owner's).
    """
    chat = await store.load_chat(chat_id, owner=owner)
    if chat.active_turn_id is None or chat.active_turn_expires_at is None:
        return None
    try:
        record = await store.load_turn(chat.active_turn_id)
    except TurnNotFound:  # pragma: no cover - a lease always names a recorded turn
        return None
    user_id, assistant_id = message_ids(record.id)
    lease = TurnLease(chat_id=chat_id, turn_id=record.id, user_message_id=user_id,
                      assistant_message_id=assistant_id, user_seq=record.user_seq,
                      assistant_seq=record.assistant_seq, base_version=chat.version,
                      expires_at=chat.active_turn_expires_at)
    await store.abort_turn(lease, TurnAbort(reason=RELEASED, path=record.path, detail=detail))
    released = await store.load_turn(record.id)
    if released.reason == RELEASED:  # the node running it stops it now (``_turn_log``)
        await announce_fenced(store, record.id)
    return released
