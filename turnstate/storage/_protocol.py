"""The Store protocol: everything the turn driver, the CLI and a chat server persist.

A turn is three short writes, each one transaction:

1. ``begin_turn``: take the chat's lease (``ChatBusy`` if a live one exists; an expired
   one is reclaimed first), insert the user message and an ``in_progress`` assistant
   message, record the turn.
2. ``record_transition`` (only when the turn degrades): append the
   ``continuation_transition`` part with ``recovered: false``, and clear a rejected
   stored envelope in the same transaction.
3. ``commit_turn`` or ``abort_turn``. The commit writes the assistant parts, audit state,
   usage, ``last_provider_state`` (through ``decide_turn_persistence``; a stateless-loop
   state is refused with ``PersistenceRefused``), ``last_context_state``, flips
   ``recovered`` to true, marks both messages completed, releases the lease and bumps
   ``version``; a version or lease mismatch raises ``CommitConflict`` and writes nothing.
   The abort marks both messages ``aborted``, keeps the chat's cursor, releases the lease.

While the turn runs, ``renew_lease`` moves its expiry forward (the engine's heartbeat).
Each take of a chat's lease increments the chat's lease epoch; the lease carries it,
and ``record_transition``, ``commit_turn`` and ``renew_lease`` refuse a lease whose turn
and epoch no longer hold the chat, in the same statement as their write (fencing):
``renew_lease`` with ``LeaseLost``, the other two with ``CommitConflict``. A lease has
expired once ``expires_at <= now`` (the store's lease clock: PostgreSQL's own;
``MemoryStore`` and ``SqliteStore`` a monotonic one, ``_lease_clock``, so no step of the
wall clock ends or prolongs a lease). Reclaiming an expired turn (at
``begin_turn`` or ``reclaim_expired``) marks its ``in_progress`` messages ``aborted``, its
record ``aborted`` with reason ``lease_expired``, and frees the chat.

Sequence numbers: a chat's messages are numbered from 1; ``begin_turn`` gives the user's
message the highest stored seq + 1 and the assistant's the next one (deleted seqs are
reused, message ids never are). Timestamps come from the store's clock; every write to a
chat row sets its ``updated_at``.

What the store writes as text (the engine and the server parse it, the store does not):
``last_provider_state`` is ``serialize_envelope(decide_turn_persistence(state))`` (None
when that is None), the assistant message's ``provider_state`` is ``encode_audit`` of the
commit's audit, and ``last_context_state`` is ``encode_context`` of its snapshot
(``turnstate.core`` / ``turnstate.storage`` export all four).

``version`` counts changes to the committed history and the chat's cursor: commits,
edits, deletes and explicit clears bump it; a turn's own begin, transition and abort
writes do not. Committed history is the ``completed`` messages in ``seq`` order.

Two counters on the chat row let a cursor turn run without reading the history (a
cursor turn must cost the same at turn 2 and turn 2,000). Every backend keeps them in
the same transaction as the change they follow (the conformance suite checks them
against ``load_history`` after every kind of write):

- ``committed_seq``: the highest ``seq`` of the committed history, None when it is
  empty. A commit sets it to the turn's assistant seq; deleting a completed message
  recomputes it; begin, transition, abort and reclaim never change it.
- ``history_chars``: ``part_chars`` (``turnstate.core``) summed over the parts
  of every committed message, the characters the context estimate counts. A commit
  adds its user and assistant messages' parts; an edit of a completed message adds the
  new count and removes the old; deleting completed messages (one, or from a seq on)
  removes their counts. Schema version 3 of SQLite (``_migrations``) and of PostgreSQL
  (``_postgres_schema``, counting in SQL functions) adds both columns and fills them for
  existing chats.

Ownership: every method that addresses a chat by id takes a keyword ``owner``. When it
is given and differs from the chat's owner, the method raises ``ChatNotFound`` exactly
as for a chat that does not exist (same type, same message), and changes nothing, so a
caller cannot tell another owner's chat from a missing one. ``owner=None`` skips the
check (trusted callers: the engine after ``begin_turn``, maintenance, tests). Methods
that take a ``TurnLease`` need no owner: ``begin_turn`` checked it when it took the lease.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from turnstate.core._conversation import Message, Part, TransitionPart
from turnstate.core._media import FilePart, ImagePart
from turnstate.storage._expected import ExpectedMessage
from turnstate.storage._lean_message import LeanMessage
from turnstate.storage._store_records import (
    DEFAULT_LEASE_SECONDS,
    ChatPosition,
    ChatRecord,
    LeanWindow,
    LeaseRenewal,
    MessageWindow,
    TurnAbort,
    TurnCommit,
    TurnLease,
    TurnRecord,
    TurnStart,
    TurnStatus,
)

__all__ = [
    "DEFAULT_LEASE_SECONDS",
    "ChatPosition",
    "ChatRecord",
    "LeanWindow",
    "LeaseRenewal",
    "MessageWindow",
    "Store",
    "TurnAbort",
    "TurnCommit",
    "TurnLease",
    "TurnRecord",
    "TurnStart",
    "TurnStatus",
]


class Store(Protocol):
    """Async persistence of chats, messages and turns. See the module docstring."""

    async def create_chat(self, *, owner: str, chat_id: str | None = None,
                          max_chats: int | None = None) -> ChatRecord:
        """A new chat (version 0, no cursor, ``committed_seq`` None, ``history_chars`` 0);
        a fresh unique id when ``chat_id`` is None. Raises ``StorageError`` for an id that
        exists, ``ChatLimitReached`` when ``max_chats`` is given and the owner already has
        that many: counted in the write itself, so concurrent creates (other processes'
        too) never pass it together."""
        ...

    async def rename_chat(self, chat_id: str, title: str | None, *,
                          owner: str | None = None) -> None:
        """Set the chat's title (None: remove it). Neither its version nor its
        ``updated_at`` change, and a running turn does not refuse it. Raises
        ``ChatNotFound`` (also for another owner's chat)."""
        ...

    async def chat_titles(self, chat_ids: Sequence[str], *,
                          owner: str) -> dict[str, str]:
        """The titles ``rename_chat`` set, by chat id, of those of ``chat_ids`` that are
        ``owner``'s and have one (unknown ids and other owners' chats are left out)."""
        ...

    async def load_chat(self, chat_id: str, *, owner: str | None = None) -> ChatRecord:
        """Raises ``ChatNotFound`` (also for another owner's chat)."""
        ...

    async def search_chats(
        self, owner: str, query: str, *, limit: int | None = None,
        after: ChatPosition | None = None,
    ) -> tuple[ChatRecord, ...]:
        """``list_chats``' page of the owner's chats whose title (``rename_chat``'s) or
        first user message's text holds ``query``, both compared folded: NFKD, without
        the combining accents U+0300-U+036F, ``str.casefold``-ed (``ß`` matches ``ss``,
        ``é`` ``e``, ``İ`` ``i``, a final ``ς`` ``σ``). Raises
        ``ConfigurationError`` for a query that is not 1 to 200 characters or a negative
        limit."""
        ...

    async def list_chats(
        self, owner: str, *, limit: int | None = None, after: ChatPosition | None = None
    ) -> tuple[ChatRecord, ...]:
        """The owner's chats, most recently updated first (ties: id, descending).

        A page: at most ``limit`` chats (all when None), starting after the position
        ``after`` (``ChatPosition.of`` the last chat of the previous page). Raises
        ``ConfigurationError`` for a negative limit.
        """
        ...

    async def load_history(
        self, chat_id: str, *, owner: str | None = None
    ) -> tuple[Message, ...]:
        """Committed history: ``completed`` messages in ``seq`` order."""
        ...

    async def list_messages(
        self, chat_id: str, *, owner: str | None = None
    ) -> tuple[Message, ...]:
        """Every message, in-progress and aborted ones included, in ``seq`` order."""
        ...

    async def load_messages(
        self, chat_id: str, *, limit: int, before_seq: int | None = None,
        after_seq: int | None = None, owner: str | None = None,
    ) -> MessageWindow:
        """A window of at most ``limit`` messages (every status), oldest first: the newest
        ones with a seq below ``before_seq`` (the chat's newest when both are None), or,
        with ``after_seq``, the oldest ones with a seq above it. A read of a page, whatever
        the chat's length: an index-backed ``ORDER BY seq DESC LIMIT limit + 1``, never a
        read of the whole chat. Raises ``ChatNotFound`` (also for another owner's chat) and
        ``ConfigurationError`` for a ``limit`` below 1 or both seqs given."""
        ...

    async def load_messages_lean(
        self, chat_id: str, *, limit: int, before_seq: int | None = None,
        after_seq: int | None = None, owner: str | None = None,
    ) -> LeanWindow:
        """``load_messages`` without the media bytes (``storage._lean``): every image or
        file part a ``MediaRef`` (its kind, media type, byte size, stored token estimate,
        url and filename), the bytes never decoded (PostgreSQL: never sent). For views
        only: a ``LeanMessage`` is no ``Message``, and every write refuses a ``MediaRef``
        (``LeanPartRefused``)."""
        ...

    async def list_messages_lean(
        self, chat_id: str, *, owner: str | None = None
    ) -> tuple[LeanMessage, ...]:
        """``list_messages`` without the media bytes, as ``load_messages_lean``."""
        ...

    async def load_media_part(
        self, chat_id: str, seq: int, index: int, *, owner: str | None = None
    ) -> ImagePart | FilePart | None:
        """Part ``index`` of message ``seq`` when it is an image or a file, with its
        bytes, read alone: not the message's other parts' bytes (what a route serving
        one attachment reads). None when that part is anything else or the message has
        fewer parts. Raises ``ChatNotFound`` (also for another owner's chat),
        ``MessageNotFound`` when the chat has no message ``seq``, and
        ``ConfigurationError`` for a negative ``index``."""
        ...

    async def begin_turn(
        self, chat_id: str, start: TurnStart, *, owner: str | None = None
    ) -> TurnLease:
        """Take the lease (see the module docstring) and return it.

        Checks, in this order, writing nothing on failure: ``ChatNotFound`` (also for
        another owner's chat), ``ChatBusy`` while another turn's lease is live (a retry of
        the running turn included), ``TurnAlreadyRecorded`` when ``start.turn_id`` names
        a recorded turn of any chat (the engine answers a retry of a completed turn from
        its record), and with ``start.replace_from`` given, ``MessageNotFound`` when the
        chat has no message of that seq. An expired lease is then reclaimed in the same
        write.

        With ``start.replace_from``, the same write then deletes the messages from that
        seq on exactly as ``delete_messages_from`` does (cursor cleared, ``version``
        bumped, counters recomputed, turn records' message ids set to NULL) before it
        inserts the turn's messages after the highest seq left; the lease's
        ``base_version`` is the bumped version. Either all of it happens or none.
        """
        ...

    async def record_transition(
        self, lease: TurnLease, part: TransitionPart, *, clear_provider_state: bool
    ) -> None:
        """Append ``part`` to the in-progress assistant message; when
        ``clear_provider_state``, set the chat's ``last_provider_state`` to NULL in the
        same transaction (logged ``[continuation][clear]``). When the reply is lost, the
        engine reads the message back through ``list_messages`` before sending it again."""
        ...

    async def commit_turn(self, lease: TurnLease, commit: TurnCommit) -> ChatRecord:
        """Write the turn's outcome (the module docstring's step 3) and return the chat.

        Raises ``PersistenceRefused`` for a state in ``stateless_loop`` mode or carrying
        ``loop_messages``, and ``CommitConflict`` when the chat's version is not
        ``lease.base_version``, the lease no longer holds the chat, or the turn's messages
        are no longer ``in_progress``; nothing is written then. The turn record becomes
        ``completed`` with the commit's strategy and path.
        """
        ...

    async def abort_turn(self, lease: TurnLease, abort: TurnAbort) -> None:
        """Mark what is still the turn's aborted (its ``in_progress`` messages, the
        assistant's taking ``abort.parts`` when there are any and keeping its stored parts
        otherwise; the record takes reason, detail, path, and strategy when given);
        release the lease only while the turn holds it (a turn takes its chat once, so
        its id names the take; an operator's ``release_chat`` builds its lease from the
        turn record). Never refuses a stale lease: it records what it can, so a turn that
        lost its chat still ends recorded."""
        ...

    async def renew_lease(self, lease: TurnLease, lease_seconds: float) -> LeaseRenewal:
        """Move the lease's expiry to now + ``lease_seconds`` (the store's clock).

        Raises ``LeaseLost`` when the chat is no longer held by this lease (another
        turn took it, or it was released), in the same statement as the update. An
        expired lease nobody took is still this turn's and is renewed.
        """
        ...

    async def clear_provider_state(
        self, chat_id: str, *, reason: str, owner: str | None = None
    ) -> None:
        """Set ``last_provider_state`` to NULL (logged ``[continuation][clear]``)."""
        ...

    async def edit_message(
        self, chat_id: str, seq: int, parts: Sequence[Part], *, owner: str | None = None,
        expect: ExpectedMessage | None = None,
    ) -> None:
        """Replace a message's parts; clears the cursor in the same transaction. Checks as
        ``delete_messages_from`` (``ChatBusy`` while a live lease is held, ``expect``), in
        the write; first, ``check_edit_parts``: an image or file a new question could not
        hold is ``InvalidInput`` naming it (``parts[1].url``), nothing written. The
        message's ``updated_at`` becomes now, or a microsecond after its last change when
        the clock has not passed it (``_expected.later_stamp``)."""
        ...

    async def delete_message(self, chat_id: str, seq: int, *, owner: str | None = None) -> None:
        """Delete a message; clears the cursor in the same transaction. Checks as
        ``delete_messages_from``."""
        ...

    async def delete_messages_from(
        self, chat_id: str, seq: int, *, owner: str | None = None,
        expect: ExpectedMessage | None = None,
    ) -> int:
        """Delete the message ``seq`` and every later one (a user's "delete from here");
        clears the cursor and bumps ``version`` in the same transaction; returns how many.

        Checks, in this order (the first failure is raised, nothing is written then):
        ``ChatNotFound`` (missing, or another owner's), ``ChatBusy`` while a live lease is
        held (the running turn's messages are not the caller's to cut), ``MessageNotFound``
        when there is no message ``seq``, and with ``expect`` given, ``MessageChanged``
        when the message there is not that one (its id, status or ``updated_at`` differ:
        another write landed since the caller read it). Turn records stay, their message
        ids set to NULL.
        """
        ...

    async def delete_chat(self, chat_id: str, *, owner: str | None = None) -> None:
        """Delete the chat with its messages and turn records, in one transaction.

        Raises ``ChatNotFound``, or ``ChatBusy`` while a live lease is held.
        """
        ...

    async def reclaim_expired(self) -> int:
        """Abort every turn whose lease expired; returns how many."""
        ...

    async def load_turn(self, turn_id: str) -> TurnRecord:
        """Raises ``LookupError`` (``TurnNotFound``) for an unknown id."""
        ...

    async def list_turns(
        self, chat_id: str, *, limit: int | None = 20, owner: str | None = None
    ) -> tuple[TurnRecord, ...]:
        """The chat's most recent turns, newest first (every turn when ``limit`` is None):
        the per-turn audit (provider, model, strategy, path, outcome) a chat view shows."""
        ...
