"""The records the Store protocol takes and returns: chats, leases, turn starts, commits
and aborts, turn records and message windows (the protocol itself is in ``_protocol``)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from enum import StrEnum

import attrs

from turnstate.core._context import ContextSnapshot
from turnstate.core._conversation import AuditState, Message, Part, Usage
from turnstate.core._envelope import ContinuationEnvelope
from turnstate.core._path import PathStep
from turnstate.storage._expected import CutExpected
from turnstate.storage._lean_message import LeanMessage

DEFAULT_LEASE_SECONDS = 30.0
"""A turn's lease when nobody says otherwise: short, because a running turn renews it
(every third of it) and a crashed node's chats must come free soon."""


def _tuple(value: Sequence[object]) -> tuple[object, ...]:
    return tuple(value)


@attrs.frozen(kw_only=True)
class ChatRecord:
    """A chat row. ``last_provider_state`` and ``last_context_state`` are the stored JSON
    text, exactly as in the database (the engine parses them, the store does not).
    ``committed_seq`` and ``history_chars`` are the counters of the module docstring."""

    id: str
    owner: str
    created_at: datetime
    updated_at: datetime
    version: int = 0
    last_provider_state: str | None = None
    last_context_state: str | None = None
    active_turn_id: str | None = None
    active_turn_expires_at: datetime | None = None
    committed_seq: int | None = None
    history_chars: int = 0


@attrs.frozen
class ChatPosition:
    """A place in an owner's chat listing (``updated_at`` descending, then ``id``
    descending): ``list_chats(after=...)`` returns the chats that come after it."""

    updated_at: datetime
    id: str

    @classmethod
    def of(cls, chat: ChatRecord) -> ChatPosition:
        return cls(chat.updated_at, chat.id)


@attrs.frozen(kw_only=True)
class TurnLease:
    """Proof that a turn holds a chat: handed back to every later write of the turn."""

    chat_id: str
    turn_id: str
    user_message_id: str
    assistant_message_id: str
    user_seq: int
    assistant_seq: int
    base_version: int
    expires_at: datetime
    epoch: int = 0
    """The fencing token: the chat's lease epoch, which grows with every take. Every
    write of the turn carries it, and the store refuses a stale one in the same
    statement as the write."""
    user_chars: int | None = None
    """The counted characters of the user's message as begin stored it: SQLite's and
    memory's commit add them to the chat's ``history_chars`` without reading the message
    again (None: they count it at commit; PostgreSQL's commit function always counts).
    Any change to the message meanwhile bumps the chat's version, and the commit is then
    refused anyway."""
    chat: ChatRecord | None = attrs.field(default=None, eq=False, repr=False)
    """The chat as begin left it, its lease taken, when the store read it in the same
    write (SQLite, memory): the engine then needs no ``load_chat`` of its own. None: the
    caller reads the chat itself."""


@attrs.frozen(kw_only=True)
class LeaseRenewal:
    """What one renewal of a turn's lease learned: its new expiry (the store's clock).

    A small frozen record, so a later per-beat fact (a stop request) is a new field."""

    expires_at: datetime


class TurnStatus(StrEnum):
    IN_PROGRESS = "in_progress"
    COMPLETED = "completed"
    ABORTED = "aborted"


@attrs.frozen(kw_only=True)
class TurnStart:
    """What ``begin_turn`` records about the turn."""

    turn_id: str
    user_parts: tuple[Part, ...] = attrs.field(converter=_tuple)
    provider: str
    model: str
    lease_seconds: float = DEFAULT_LEASE_SECONDS
    replace_from: int | None = None
    """When given, begin first deletes the message of this seq and every later one, in
    its own write (an "edit and regenerate", the server's regenerate): exactly what
    ``delete_messages_from`` does, so no other turn can take the chat between the cut and
    the take. None: nothing is deleted."""
    attached: bool = False
    """The turn runs attached: its consumer iterates it with ``run_turn`` in its own loop
    and its events are never logged (``turn_log``). The store keeps the mark with the turn
    and its log's reader gives it back (``TurnLogPage.attached``): a follower on another
    node then knows the log stays empty. False: a detached turn, or not known (a store or
    an embedder that does not say)."""
    client_key: str | None = None
    """The client's key for this question (``TurnInput.client_key``): the store keeps it
    with the turn, unique in its chat, and a begin naming a key a turn of the chat holds
    is ``TurnKeyRecorded`` naming that turn, before the chat is taken (nothing is
    written). None: no key (the usual turn; its begin is unchanged)."""
    expect: CutExpected | None = None
    """With ``replace_from``: the message at the cut's seq and the key's holder as the
    caller read them (``CutExpected``), compared in the begin's write. None: nothing
    compared (the begin as before)."""


@attrs.frozen(kw_only=True)
class TurnCommit:
    """Everything a commit writes, in one transaction.

    Attributes:
        parts: the assistant message's parts (transition parts included; the store sets
            their ``recovered`` to true).
        provider_state: the turn's final provider state; the store applies
            ``decide_turn_persistence`` and refuses a stateless-loop state.
        audit: written to ``messages.provider_state`` of the assistant message.
    """

    parts: tuple[Part, ...] = attrs.field(converter=_tuple)
    provider_state: ContinuationEnvelope | None
    audit: AuditState | None
    usage: Usage
    context: ContextSnapshot | None
    strategy: str
    path: tuple[PathStep, ...] = attrs.field(converter=_tuple)


@attrs.frozen(kw_only=True)
class TurnAbort:
    """What an abort records. ``parts`` is what the turn had produced (for listings).

    ``usage`` and ``audit``: what the turn's answered requests billed and its audit record
    (``costUsd`` in its metadata, no cursor), written on the aborted answer like a
    commit's, so the chat's cost counts the turn; None when no request was answered. Like
    the rest of an abort, they are written only while the answer is still the turn's.
    """

    reason: str
    parts: tuple[Part, ...] = attrs.field(default=(), converter=_tuple)
    strategy: str | None = None
    path: tuple[PathStep, ...] = attrs.field(default=(), converter=_tuple)
    detail: str | None = None
    usage: Usage | None = None
    audit: AuditState | None = None


@attrs.frozen(kw_only=True)
class TurnRecord:
    """One turn, for ``inspect`` and path diagrams. ``assistant_message_id`` ties it to
    its answer (None once "delete from here" removed that message: sequence numbers are
    reused after a delete, message ids never are)."""

    id: str
    chat_id: str
    status: TurnStatus
    provider: str
    model: str
    user_seq: int
    assistant_seq: int
    started_at: datetime
    strategy: str | None = None
    reason: str | None = None
    detail: str | None = None
    path: tuple[PathStep, ...] = attrs.field(default=(), converter=_tuple)
    ended_at: datetime | None = None
    assistant_message_id: str | None = None


@attrs.frozen(kw_only=True)
class MessageWindow:
    """One window of a chat's messages, as ``Store.load_messages`` reads it.

    Attributes:
        messages: the messages of the window (every status), oldest first.
        more: whether messages lie beyond the window in the direction read: older ones
            for a read before a seq (or of the newest), newer ones for a read after one.
        total: how many messages the whole chat holds.
        turns: the turn records whose assistant message is in the window (any order),
            so a view ties each answer to its turn without reading every turn.
    """

    messages: tuple[Message, ...] = attrs.field(converter=_tuple)
    more: bool
    total: int
    turns: tuple[TurnRecord, ...] = attrs.field(default=(), converter=_tuple)


@attrs.frozen(kw_only=True)
class LeanWindow:
    """``MessageWindow`` of lean messages (``Store.load_messages_lean``)."""

    messages: tuple[LeanMessage, ...] = attrs.field(converter=_tuple)
    more: bool
    total: int
    turns: tuple[TurnRecord, ...] = attrs.field(default=(), converter=_tuple)
