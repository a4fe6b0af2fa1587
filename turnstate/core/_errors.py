"""The error tree of turnstate, in one place (the classes of its ``StorageError`` and
``ProviderError`` branches live in ``_errors_storage`` and ``_errors_provider``, its root in
``_errors_base``; every one is importable from here).

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
    ├── TurnDeadlineExceeded                a turn ran past its deadline
    │                                       (``TurnLimits.turn_seconds``, ``deadline_seconds``)
    ├── StorageError
    │   ├── ChatNotFound (LookupError)      no chat with that id
    │   ├── MessageNotFound (LookupError)   no message with that sequence number
    │   ├── MessageChanged                  a conditional change found another message there
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
    │   ├── TurnKeyRecorded                 a client key names a turn of the chat already
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

from turnstate.core._errors_base import TurnstateError
from turnstate.core._errors_provider import (
    ContextLengthExceeded,
    CursorRejected,
    FatalProviderError,
    ProviderError,
    ProviderPoolExhausted,
    ProviderProtocolError,
    RateLimited,
    StreamLimitExceeded,
    TransientProviderError,
)
from turnstate.core._errors_storage import (
    ChatAlreadyExists,
    ChatBusy,
    ChatLimitReached,
    ChatNotFound,
    CommitConflict,
    LeanPartRefused,
    LeaseLost,
    MessageChanged,
    MessageNotFound,
    PersistenceRefused,
    StorageContention,
    StorageError,
    StoragePoolExhausted,
    StorageQuotaExceeded,
    StorageTimeout,
    StorageUnavailable,
    TurnAlreadyRecorded,
    TurnFinished,
    TurnKeyRecorded,
    TurnNotFound,
)

__all__ = [
    "ChatAlreadyExists",
    "ChatBusy",
    "ChatLimitReached",
    "ChatNotFound",
    "CommitConflict",
    "ConfigurationError",
    "ContextLengthExceeded",
    "CursorRejected",
    "EngineClosed",
    "EnvelopeMalformed",
    "EventMalformed",
    "FatalProviderError",
    "InvalidDefinition",
    "InvalidInput",
    "LeanPartRefused",
    "LeaseLost",
    "MessageChanged",
    "MessageNotFound",
    "PersistenceRefused",
    "ProviderError",
    "ProviderPoolExhausted",
    "ProviderProtocolError",
    "RateLimited",
    "StorageContention",
    "StorageError",
    "StoragePoolExhausted",
    "StorageQuotaExceeded",
    "StorageTimeout",
    "StorageUnavailable",
    "StreamLimitExceeded",
    "TransientProviderError",
    "TransitionRefused",
    "TurnAlreadyRecorded",
    "TurnDeadlineExceeded",
    "TurnFinished",
    "TurnKeyRecorded",
    "TurnNotFound",
    "TurnstateError",
]


class EngineClosed(TurnstateError):
    """``TurnEngine.start_turn`` after ``aclose`` began: refused before the chat is
    touched (a start already in flight when it began ends ``cancelled`` instead)."""


class TurnDeadlineExceeded(TurnstateError):
    """A turn ran past its deadline (``seconds`` after it took its chat's lease), or a
    retry of its provider call would have waited past it. The engine ends the turn with
    it, ``turn_aborted`` reason ``deadline_exceeded``: the call or tool run in flight
    cancelled, the bill of the requests already sent kept. ``detail`` says where."""

    def __init__(self, seconds: float, detail: str = "") -> None:
        text = f"the turn ran past its deadline of {seconds:g}s"
        super().__init__(f"{text} ({detail})" if detail else text)
        self.seconds = seconds
        self.detail = detail


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
