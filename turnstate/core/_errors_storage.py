"""The store's errors, the ``StorageError`` branch of the tree drawn in
``turnstate.core._errors`` (which re-exports them)."""

from __future__ import annotations

from turnstate.core._errors_base import TurnstateError


class StorageError(TurnstateError):
    """Base class of the store's errors."""


class LeanPartRefused(StorageError, TypeError):
    """A part read without its bytes (``MediaRef``, a store's lean read) was handed to a
    write: it stands for bytes it does not hold, so it is never stored (or sent)."""

    def __init__(self) -> None:
        super().__init__("a MediaRef (a part read without its bytes) cannot be stored or "
                         "sent; read the message with its bytes instead")


class ChatNotFound(StorageError, LookupError):
    """No chat exists with the given id."""

    def __init__(self, chat_id: str) -> None:
        super().__init__(f"no chat with id {chat_id!r}")
        self.chat_id = chat_id


class MessageNotFound(StorageError, LookupError):
    """No message with the given sequence number exists in the chat."""

    def __init__(self, chat_id: str, seq: int) -> None:
        super().__init__(f"chat {chat_id!r} has no message {seq}")
        self.chat_id = chat_id
        self.seq = seq


class MessageChanged(StorageError):
    """A conditional change found another message at its seq than the one it expected
    (``ExpectedMessage``: another write landed since the caller read it); nothing was
    written. ``message_id``: the id of the message there now."""

    def __init__(self, chat_id: str, seq: int, message_id: str) -> None:
        super().__init__(f"message {seq} of chat {chat_id!r} is not the one expected "
                         "(it changed since it was read)")
        self.chat_id = chat_id
        self.seq = seq
        self.message_id = message_id


class TurnNotFound(StorageError, LookupError):
    """No turn with the given id was recorded."""

    def __init__(self, turn_id: str) -> None:
        super().__init__(f"no turn with id {turn_id!r}")
        self.turn_id = turn_id


class TurnFinished(StorageError):
    """A stop was asked of a turn that had already ended: ``state`` is the final state it
    ended in (``done`` or ``aborted``), ``reason`` its abort reason (None when done)."""

    def __init__(self, turn_id: str, state: str, reason: str | None) -> None:
        ended = f"{state} ({reason})" if reason else state
        super().__init__(f"turn {turn_id!r} already ended: {ended}")
        self.turn_id, self.state, self.reason = turn_id, state, reason


class ChatBusy(StorageError):
    """Another turn holds the chat's lease; refused before any provider call."""

    def __init__(self, chat_id: str, active_turn_id: str) -> None:
        super().__init__(f"chat {chat_id!r} is busy with turn {active_turn_id!r}")
        self.chat_id = chat_id
        self.active_turn_id = active_turn_id


class ChatAlreadyExists(StorageError):
    """``create_chat(chat_id=...)``: a chat with that id is already stored (any owner's)."""

    def __init__(self, chat_id: str) -> None:
        super().__init__(f"chat {chat_id!r} already exists")
        self.chat_id = chat_id


class ChatLimitReached(StorageError):
    """``create_chat(max_chats=...)``: the owner already has ``limit`` chats (counted by the
    store in the write itself, so concurrent creates cannot pass it together)."""

    def __init__(self, owner: str, limit: int) -> None:
        super().__init__(f"owner {owner!r} already has {limit} chats, the most allowed")
        self.owner = owner
        self.limit = limit


class StorageQuotaExceeded(StorageError):
    """A write that grows an owner's stored data (a turn's begin, an edit, a title, a
    chat) would take it past the store's ``storage_quota`` (``set_storage_quota``): refused
    in the write itself, nothing of it stored. A turn's commit and its event log are
    never refused (the provider was paid): they may take the owner past the quota, and
    the owner's next turn is refused."""

    def __init__(self, owner: str | None, limit: int | None) -> None:
        whose = "the owner" if owner is None else f"owner {owner!r}"
        size = "its quota" if limit is None else f"its quota of {limit} bytes"
        super().__init__(f"{whose} has stored {size}: delete chats or messages to free room")
        self.owner = owner
        self.limit = limit


class CommitConflict(StorageError):
    """The chat changed (version or lease) between the turn's begin and its commit."""

    def __init__(self, chat_id: str, expected_version: int, actual_version: int | None) -> None:
        super().__init__(
            f"chat {chat_id!r} changed during the turn: expected version "
            f"{expected_version}, found {actual_version}"
        )
        self.chat_id = chat_id
        self.expected_version = expected_version
        self.actual_version = actual_version


class LeaseLost(CommitConflict):
    """The turn no longer holds its chat: another turn took the lease (after it expired),
    or an operator released it. Raised by ``renew_lease`` for a stale lease epoch."""

    def __init__(self, chat_id: str, turn_id: str, epoch: int) -> None:
        StorageError.__init__(
            self, f"turn {turn_id!r} no longer holds chat {chat_id!r} (lease epoch {epoch})")
        self.chat_id, self.turn_id, self.epoch = chat_id, turn_id, epoch
        self.expected_version, self.actual_version = 0, None


class TurnAlreadyRecorded(StorageError):
    """A turn with this id already exists (``status`` is its status when known).

    ``begin_turn`` raises it for a reused id; the engine then answers a retry of a
    completed turn with its stored outcome, of a running one with ``ChatBusy``, and
    refuses a retry of an aborted one with this error, naming the turn."""

    def __init__(self, turn_id: str, status: str | None = None) -> None:
        known = f" and {status}" if status else ""
        super().__init__(f"turn {turn_id!r} is already recorded{known}")
        self.turn_id, self.status = turn_id, status


class TurnKeyRecorded(StorageError):
    """A turn of this chat already carries this client key (``TurnInput.client_key``).

    ``begin_turn`` raises it before it takes the chat (nothing is written, no provider
    is called): the request is a retry of turn ``turn_id``, which its caller follows or
    reads (``TurnEngine.follow``) instead of running the question again."""

    def __init__(self, chat_id: str, key: str, turn_id: str) -> None:
        super().__init__(f"chat {chat_id!r} already has turn {turn_id!r} for client key "
                         f"{key!r}")
        self.chat_id, self.key, self.turn_id = chat_id, key, turn_id


class PersistenceRefused(StorageError):
    """A state that must never reach the database was handed to the store."""


class StorageUnavailable(StorageError):
    """The database could not be reached, or the connection dropped during a statement.

    Each store write is one transaction, so a write that raised this either happened
    whole or not at all; a begun turn's lease then expires and is reclaimed as usual.
    """


class StorageTimeout(StorageError):
    """A statement was cancelled by the database's ``statement_timeout``; nothing of it
    was written."""


class StoragePoolExhausted(StorageError):
    """Every pooled connection stayed busy for the whole acquire timeout."""


class StorageContention(StorageError):
    """Serialization failures or deadlocks persisted through every retry."""


STORAGE_OUTAGES: tuple[type[StorageError], ...] = (
    StorageUnavailable, StorageTimeout, StoragePoolExhausted, StorageContention)
"""The store errors that a moment later may not recur (the database unreachable or
restarting, its pool exhausted, a statement unanswered, contention that outlasted the
store's own retries): a running turn's reads and commit wait them out while its lease
lasts (``engine._patience``), the turn log's writer retries them, and the server answers
them ``503`` with ``Retry-After``."""
