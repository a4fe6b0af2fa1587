"""The message a conditional change expects at its seq (places12).

A client that names a message by what it saw (the server's ``If-Match``) is checked by a
read, then the change is written: another request's write between the two would go
unseen. ``edit_message`` and ``delete_messages_from`` therefore take an
``ExpectedMessage``, the message as the caller read it, and compare it with the message at
the seq inside their own write (the chat's row locked, or the store's one transaction):
another message there, or the same one changed, is ``MessageChanged`` and nothing is
written; none there is ``MessageNotFound`` as before.

A message is known by its id (never given to another message), its status and its
``updated_at``. Every change of a message outside a turn (an edit) stamps it strictly
later than its last change (``later_stamp``), so an edit is seen even when the clock did
not move (a test's frozen clock, a coarse system clock); a turn's own writes change the
status or happen under a lease, which refuses every change outside the turn.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import attrs

from turnstate.core._conversation import Message, MessageStatus
from turnstate.core._errors import MessageChanged, TurnKeyRecorded
from turnstate.storage._lean_message import LeanMessage
from turnstate.storage._records import format_ts, parse_ts

_TICK = timedelta(microseconds=1)


@attrs.frozen
class ExpectedMessage:
    """The message the caller read at the seq it changes (its id, status and last
    change), which the store compares with the stored one in the change's write."""

    id: str
    status: MessageStatus
    updated_at: datetime

    @classmethod
    def of(cls, message: Message | LeanMessage) -> ExpectedMessage:
        return cls(id=message.id, status=message.status, updated_at=message.updated_at)

    def check(self, chat_id: str, seq: int, found_id: str, status: str,
              updated_at: datetime | str) -> None:
        """``MessageChanged`` unless the stored message (its id, status value and
        ``updated_at``, a datetime or ``format_ts`` text) is this one."""
        at = parse_ts(updated_at) if isinstance(updated_at, str) else updated_at
        if (found_id, status, at) != (self.id, self.status.value, self.updated_at):
            raise MessageChanged(chat_id, seq, found_id)


def later_stamp(now: str, last: str) -> str:
    """The ``format_ts`` time to stamp an edited message with: ``now``, or a microsecond
    after its ``last`` change when the clock has not passed it."""
    stamp = parse_ts(last)
    return now if parse_ts(now) > stamp else format_ts(stamp + _TICK)


@attrs.frozen
class CutExpected:
    """What a begin that cuts (``TurnStart.replace_from``) expects to find, compared in
    its own write (places12): ``message``, the message at the cut's seq as the caller
    read it (``MessageChanged`` when another is there; its absence stays
    ``MessageNotFound``); with ``key_checked``, the turn that holds the begin's
    ``client_key`` as the caller read it (``key_holder``, None: none). The key is taken
    over only from that turn: another holder (a copy of the same keyed edit that began
    and ended on another node since the caller's check) is ``TurnKeyRecorded`` naming it
    (its ``turn_id`` empty when the key is free now), checked before the lease as the
    begin's own key check, nothing written."""

    message: ExpectedMessage | None = None
    key_holder: str | None = None
    key_checked: bool = False

    def check_holder(self, chat_id: str, key: str | None, holder: str | None) -> None:
        """``TurnKeyRecorded`` when the key's ``holder`` now (whatever its seq) is not the
        one the caller saw; nothing when the key was not checked or there is none."""
        if self.key_checked and key is not None and holder != self.key_holder:
            raise TurnKeyRecorded(chat_id, key, holder or "")
