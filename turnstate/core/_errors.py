"""The error tree of turnstate, in one place.

Every error turnstate raises on purpose is a ``TurnstateError``; callers catch the
branch they can act on::

    TurnstateError
    ├── EnvelopeMalformed (ValueError)      a stored continuation state cannot be read
    ├── EventMalformed (ValueError)         an event's JSON (``parse_event``) cannot be read
    ├── InvalidDefinition                   the transition table is wrong (a bug, found at build)
    ├── TransitionRefused                   a trigger was not allowed from the current state
    ├── ConfigurationError (ValueError)     an unknown provider, model or bad setting
    ├── InvalidInput (ValueError)           user text, a tool spec or a setting the engine
    │                                       refuses before it takes a lease
    ├── EngineClosed                        ``start_turn`` on an engine already closed
    ├── StorageError
    │   ├── ChatNotFound (LookupError)      no chat with that id
    │   ├── MessageNotFound (LookupError)   no message with that sequence number
    │   ├── TurnNotFound (LookupError)      no turn with that id
    │   ├── TurnFinished                    a stop asked of a turn that already ended
    │   ├── ChatBusy                        another turn holds the chat's lease
    │   ├── ChatAlreadyExists               create_chat was given a chat id already taken
    │   ├── ChatLimitReached                the owner has as many chats as create_chat allows
    │   ├── StorageQuotaExceeded            the owner's stored bytes would pass the store's quota
    │   ├── CommitConflict                  the chat changed while the turn ran
    │   │   └── LeaseLost                   the turn's lease was taken or released: its
    │   │                                   renewal (or a fenced write) was refused
    │   ├── TurnAlreadyRecorded             a turn id names a turn that already exists
    │   ├── PersistenceRefused              a state that must never be stored was handed over
    │   ├── LeanPartRefused (TypeError)     a part read without its bytes was handed to a write
    │   ├── StorageUnavailable              the database cannot be reached, or the connection
    │   │                                   dropped (a write then happened whole or not at all)
    │   ├── StorageTimeout                  a statement ran past the database's timeout
    │   ├── StoragePoolExhausted            no pooled connection came free in time
    │   └── StorageContention               serialization failures or deadlocks outlasted the
    │                                       store's retries
    └── ProviderError                       anything a provider call can go wrong with
        ├── TransientProviderError          worth retrying (429, 5xx, 529, connection loss)
        │   ├── RateLimited                 with the server's ``retry_after``
        │   └── ProviderPoolExhausted       no pooled connection to the provider came free
        │                                   within ``PoolLimits.wait_seconds``
        ├── CursorRejected                  the durable cursor is gone (``cursor_expired``)
        │                                   or unusable (``cursor_invalid``)
        └── FatalProviderError              a request the provider will never accept
            ├── ContextLengthExceeded       the input is longer than the model's context window
            ├── ProviderProtocolError       a malformed frame or a stream that broke its rules
            └── StreamLimitExceeded         a response crossed a declared limit (``limit``)

Each class has a stable ``error_code``, its name in snake_case (``ChatBusy``:
``chat_busy``), for an embedder's own API answers and logs (a provider error's ``code``
is the provider's own). Errors carry structured fields so handlers never parse messages,
and messages never contain credentials: provider errors are built from status codes and
error bodies only. The one boundary that turns them into user-facing text is the CLI (and
the reference server); inside the library they propagate as they are.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar


class TurnstateError(Exception):
    """Base class of every error turnstate raises on purpose.

    ``error_code``: the class's stable code, its name in snake_case (``ChatBusy``:
    ``chat_busy``), set for every subclass as it is defined."""

    error_code: ClassVar[str] = "turnstate_error"

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "error_code" not in cls.__dict__:
            cls.error_code = _snake(cls.__name__.lstrip("_"))


def _snake(name: str) -> str:
    """``ChatBusy`` -> ``chat_busy``."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


class EngineClosed(TurnstateError):
    """``TurnEngine.start_turn`` after ``aclose`` began: refused before the chat is
    touched (a start already in flight when it began ends ``cancelled`` instead)."""


class EnvelopeMalformed(TurnstateError, ValueError):
    """A stored continuation envelope could not be accepted.

    ``parse_envelope`` raises only this, whatever its input. ``detail`` says what was
    wrong without echoing the (possibly huge) input back.
    """

    def __init__(self, detail: str) -> None:
        super().__init__(f"malformed continuation envelope: {detail}")
        self.detail = detail


class EventMalformed(TurnstateError, ValueError):
    """An event's JSON could not be read back (``parse_event``, ``event_json``'s
    inverse): not JSON, an unknown ``type``, or a field missing or mistyped
    (``detail``)."""

    def __init__(self, detail: str) -> None:
        super().__init__(f"malformed event: {detail}")
        self.detail = detail


class InvalidDefinition(TurnstateError):
    """The transition table breaks a rule of the machine's definition.

    Raised when the shared machine is built, never while a turn runs.
    """

    def __init__(self, problems: list[str]) -> None:
        super().__init__("invalid transition table: " + "; ".join(problems))
        self.problems = tuple(problems)


class TransitionRefused(TurnstateError):
    """The driver fired a trigger that the table does not allow from the current state."""

    def __init__(self, state: str, trigger: str) -> None:
        super().__init__(f"trigger {trigger!r} is not allowed from state {state!r}")
        self.state = state
        self.trigger = trigger


class ConfigurationError(TurnstateError, ValueError):
    """An unknown provider or model, or a setting outside its range."""


class InvalidInput(TurnstateError, ValueError):
    """Input refused before any lease is taken or any provider is called.

    User text that is not valid Unicode (lone surrogates cannot be encoded as UTF-8) or
    is longer than the engine's limit, a tool whose name or parameters are not a valid
    JSON-schema object. ``field`` names the offending input (``user_text``,
    ``tools[weather].parameters``, ...); ``problem`` says what is wrong with it.
    """

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"invalid {field}: {problem}")
        self.field = field
        self.problem = problem


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


class ProviderError(TurnstateError):
    """A provider call failed.

    Attributes:
        provider: the provider's registry name (``openai``, ``anthropic``, ...).
        status: the HTTP status, or None for in-stream and connection errors.
        code: the provider's machine-readable error code or type, when it sent one.
        detail: the provider's message (never contains credentials).
        kind: the class of failure as a word (``ProviderFailure.error_type``).
    """

    retryable = False
    kind = "provider_error"

    def __init__(
        self,
        provider: str,
        detail: str,
        *,
        status: int | None = None,
        code: str | None = None,
    ) -> None:
        where = f"HTTP {status}" if status is not None else "stream"
        label = f" [{code}]" if code else ""
        super().__init__(f"{provider} {where}{label}: {detail}")
        self.provider = provider
        self.detail = detail
        self.status = status
        self.code = code


class TransientProviderError(ProviderError):
    """A failure worth retrying: rate limits, 5xx, 529, timeouts and connection loss."""

    retryable = True
    kind = "transient"


class RateLimited(TransientProviderError):
    """HTTP 429 (or an equivalent), with the server's ``Retry-After`` in seconds if sent."""

    kind = "rate_limited"

    def __init__(
        self,
        provider: str,
        detail: str,
        *,
        status: int | None = 429,
        code: str | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(provider, detail, status=status, code=code)
        self.retry_after = retry_after


class ProviderPoolExhausted(TransientProviderError):
    """Every connection of the transport's pool to the provider's host stayed busy for
    the whole ``PoolLimits.wait_seconds``; the request was never sent. Retryable by the
    embedder (a later turn finds the pool freer); the transport does not retry it itself,
    which would only wait again."""

    kind = "pool_exhausted"

    def __init__(self, provider: str, detail: str) -> None:
        super().__init__(provider, detail, code="pool_exhausted")


class CursorRejected(ProviderError):
    """The provider refused the durable cursor.

    ``reason`` is ``"cursor_expired"`` (missing, expired, evicted) or
    ``"cursor_invalid"`` (malformed or foreign); the driver maps it to the declared
    cursor-loss edges.
    """

    kind = "cursor_rejected"

    def __init__(
        self,
        provider: str,
        detail: str,
        *,
        reason: str,
        status: int | None = None,
        code: str | None = None,
    ) -> None:
        super().__init__(provider, detail, status=status, code=code)
        self.reason = reason


class FatalProviderError(ProviderError):
    """A request the provider will not accept however often it is sent."""

    kind = "fatal"


class ContextLengthExceeded(FatalProviderError):
    """The provider refused the request because its input (on a cursor: the whole
    conversation the provider stores) exceeds the model's context window (OpenAI
    ``context_length_exceeded``; Gemini's 400 "input token count ... exceeds the maximum
    number of tokens allowed"). Sending the same request again never helps; on a cursor
    turn the driver degrades to a trimmed replay (``context_overflow``); out of a replay
    or a local loop it trims further (``context_refused``).

    Attributes:
        input_tokens: the provider's own count of the refused input, when its message
            says it (Gemini "The input token count (N) ...", OpenAI "your messages
            resulted in N tokens", Anthropic "prompt is too long: N tokens > M maximum").
        context_limit: the window the provider says it enforced (M), when it says it.
    """

    kind = "context_length_exceeded"

    def __init__(
        self,
        provider: str,
        detail: str,
        *,
        status: int | None = None,
        code: str | None = None,
        input_tokens: int | None = None,
        context_limit: int | None = None,
    ) -> None:
        super().__init__(provider, detail, status=status, code=code)
        self.input_tokens = input_tokens
        self.context_limit = context_limit


class ProviderProtocolError(FatalProviderError):
    """The provider's bytes broke the wire format: a malformed frame, a truncated stream."""

    kind = "protocol_error"


class StreamLimitExceeded(FatalProviderError):
    """A response crossed one of the declared stream or response limits.

    ``limit`` names it (``max_stream_seconds``, ``max_stream_bytes``, ``max_line_bytes``,
    ``max_event_bytes``, ``max_event_gap_seconds``, ``max_output_deltas``,
    ``max_tool_calls``); the turn
    aborts ``provider_failed`` with a detail that names it too.
    """

    kind = "stream_limit"

    def __init__(self, provider: str, limit: str, detail: str) -> None:
        super().__init__(provider, f"{limit} exceeded: {detail}", code="stream_limit_exceeded")
        self.limit = limit
