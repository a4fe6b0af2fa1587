"""``release_chat``: an operator frees a stuck chat (``turnstate release DB CHAT_ID``).

The chat's running turn is recorded ``aborted`` with reason ``released`` and the lease is
freed, whether or not it has expired. Safe against the turn itself: the abort only marks
what is still in progress and frees the chat only while that turn holds it, so a turn
that committed meanwhile is left as it is; a turn still running is told at once where
the store can tell it (``announce_fenced``: this process, and PostgreSQL's other nodes by
notification), else finds its next renewal and every fenced write refused, and ends
``lease_lost`` without another side effect.

A lease can name a turn that has no record (a turns row lost to a restore from an older
backup, a hand repair, a custom store that takes the lease before it writes the turn):
the lease is freed all the same, and the turn's messages, found by their derived ids
among the chat's newest, are aborted (``free_chat`` says which turn it was, and that it
had no record). It used to answer "no turn holds it" and leave the chat held.
"""

from __future__ import annotations

import attrs

from turnstate.core._errors import TurnNotFound
from turnstate.storage._fence_signal import announce_fenced
from turnstate.storage._protocol import Store, TurnAbort, TurnLease, TurnRecord
from turnstate.storage._records import message_ids

RELEASED = "released"
"""The abort reason of a turn an operator released."""
_TAIL = 8
"""How many of a chat's newest messages a release reads to find a recordless turn's
(they are its newest two: a held chat takes no other turn)."""


@attrs.frozen
class Released:
    """What ``free_chat`` freed: the turn the lease named (None when none held the chat)
    and that turn's record as left afterwards (None when it has none)."""

    turn_id: str | None
    record: TurnRecord | None


async def release_chat(store: Store, chat_id: str, *, owner: str | None = None,
                       detail: str = "released by an operator") -> TurnRecord | None:
    """Abort the chat's running turn as ``released`` and free its lease.

    Returns the released turn as recorded afterwards, or None when no turn held the chat.

    Raises:
        ChatNotFound: no such chat (or another owner's).
    """
    return (await free_chat(store, chat_id, owner=owner, detail=detail)).record


async def free_chat(store: Store, chat_id: str, *, owner: str | None = None,
                    detail: str = "released by an operator") -> Released:
    """``release_chat`` that also tells a lease freed whose turn has no record.

    Raises:
        ChatNotFound: no such chat (or another owner's).
    """
    chat = await store.load_chat(chat_id, owner=owner)
    turn_id, expires_at = chat.active_turn_id, chat.active_turn_expires_at
    if turn_id is None or expires_at is None:
        return Released(turn_id=None, record=None)
    user_id, assistant_id = message_ids(turn_id)
    try:
        record: TurnRecord | None = await store.load_turn(turn_id)
    except TurnNotFound:
        record = None
    if record is not None:
        user_seq, assistant_seq, path = record.user_seq, record.assistant_seq, record.path
    else:
        window = await store.load_messages_lean(chat_id, limit=_TAIL, owner=owner)
        seqs = {m.id: m.seq for m in window.messages}
        user_seq, assistant_seq, path = seqs.get(user_id, -1), seqs.get(assistant_id, -1), ()
    lease = TurnLease(chat_id=chat_id, turn_id=turn_id, user_message_id=user_id,
                      assistant_message_id=assistant_id, user_seq=user_seq,
                      assistant_seq=assistant_seq, base_version=chat.version,
                      expires_at=expires_at)
    await store.abort_turn(lease, TurnAbort(reason=RELEASED, path=path, detail=detail))
    if record is None:  # whoever may still run it finds its lease gone
        await announce_fenced(store, turn_id)
        return Released(turn_id=turn_id, record=None)
    released = await store.load_turn(turn_id)
    if released.reason == RELEASED:  # the node running it stops it now (``_turn_log``)
        await announce_fenced(store, turn_id)
    return Released(turn_id=turn_id, record=released)
