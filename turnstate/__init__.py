"""turnstate: continue multi-turn LLM conversations across providers.

The package is built in one-way layers, each importing only the ones below it:

- ``turnstate.core``: the IO-free vocabulary (envelope, decisions, registry, context policy,
  conversation items, events, errors);
- ``turnstate.states``: the transition table and the shared machine;
- ``turnstate.providers`` and ``turnstate.storage``: wire codecs and transport;
  the Store protocol and its backends;
- ``turnstate.engine``: ``TurnEngine``, which drives a turn over all of them, and beside it
  ``turnstate.emulators``: the provider emulators and the scripted model, which production
  never imports;
- the top: the server, the command line and the diagrams.

This module re-exports what a chat server embedding turnstate needs (``docs/api.md``).
"""

import logging
from typing import TYPE_CHECKING, Any

from turnstate.core import (
    DEFAULT_REGISTRY,
    AuditState,
    CachePolicy,
    ChatBusy,
    ChatLimitReached,
    ChatNotFound,
    CommitConflict,
    ConfigurationError,
    ContextLengthExceeded,
    ContextSettings,
    ContextSnapshot,
    ContextSnapshotEvent,
    ContinuationDegraded,
    ContinuationEnvelope,
    CursorRejected,
    DegradationReason,
    EngineClosed,
    EnvelopeMalformed,
    FallbackNotice,
    FatalProviderError,
    FilePart,
    GenerationSettings,
    ImagePart,
    InvalidDefinition,
    InvalidInput,
    Message,
    MessageNotFound,
    MessageStatus,
    Mode,
    ModelInfo,
    ModelPrice,
    OverflowPolicy,
    Part,
    PersistenceRefused,
    ProviderError,
    ProviderFailure,
    ProviderPoolExhausted,
    ProviderProtocolError,
    RateLimited,
    ReasoningDeltaEvent,
    ReasoningEffort,
    ReasoningPart,
    Registry,
    ResponseFormat,
    Role,
    Severity,
    StateChanged,
    StorageContention,
    StorageError,
    StoragePoolExhausted,
    StorageTimeout,
    StorageUnavailable,
    Strategy,
    StreamLimitExceeded,
    TextDeltaEvent,
    TextPart,
    Tool,
    ToolCallEvent,
    ToolCallPart,
    ToolHandler,
    ToolResultEvent,
    ToolResultPart,
    ToolSpec,
    TransientProviderError,
    TransitionPart,
    TransitionRefused,
    TurnAborted,
    TurnAlreadyRecorded,
    TurnCompleted,
    TurnCost,
    TurnEvent,
    TurnFinished,
    TurnNotFound,
    TurnstateError,
    TurnStats,
    UnknownModelPolicy,
    Usage,
    UserPart,
    chat_cost,
    event_json,
    message_cost,
    parse_envelope,
)
from turnstate.engine import TurnEngine, TurnInput, TurnLimits
from turnstate.engine._follow import Following
from turnstate.engine._live import LiveTurn
from turnstate.providers import (
    AiohttpTransport,
    AnthropicAdapter,
    ChatCompletionsAdapter,
    DeepSeekAdapter,
    DrainLimits,
    GeminiInteractionsAdapter,
    OpenAIResponsesAdapter,
    PoolLimits,
    ProviderAdapter,
    RetryPolicy,
    StreamLimits,
    ThinksByDefault,
    Transport,
)
from turnstate.storage import ChatRecord, MemoryStore, SqliteStore, Store, open_store
from turnstate.storage._turn_log import LoggedEvent

if TYPE_CHECKING:
    from turnstate.storage import PostgresStore

# A library never prints on its own: the application decides where "turnstate" logs go.
logging.getLogger("turnstate").addHandler(logging.NullHandler())

__version__ = "0.1.0"

__all__ = [
    "DEFAULT_REGISTRY",
    "AiohttpTransport",
    "AnthropicAdapter",
    "AuditState",
    "CachePolicy",
    "ChatBusy",
    "ChatCompletionsAdapter",
    "ChatLimitReached",
    "ChatNotFound",
    "ChatRecord",
    "CommitConflict",
    "ConfigurationError",
    "ContextLengthExceeded",
    "ContextSettings",
    "ContextSnapshot",
    "ContextSnapshotEvent",
    "ContinuationDegraded",
    "ContinuationEnvelope",
    "CursorRejected",
    "DeepSeekAdapter",
    "DegradationReason",
    "DrainLimits",
    "EngineClosed",
    "EnvelopeMalformed",
    "FallbackNotice",
    "FatalProviderError",
    "FilePart",
    "Following",
    "GeminiInteractionsAdapter",
    "GenerationSettings",
    "ImagePart",
    "InvalidDefinition",
    "InvalidInput",
    "LiveTurn",
    "LoggedEvent",
    "MemoryStore",
    "Message",
    "MessageNotFound",
    "MessageStatus",
    "Mode",
    "ModelInfo",
    "ModelPrice",
    "OpenAIResponsesAdapter",
    "OverflowPolicy",
    "Part",
    "PersistenceRefused",
    "PoolLimits",
    "PostgresStore",
    "ProviderAdapter",
    "ProviderError",
    "ProviderFailure",
    "ProviderPoolExhausted",
    "ProviderProtocolError",
    "RateLimited",
    "ReasoningDeltaEvent",
    "ReasoningEffort",
    "ReasoningPart",
    "Registry",
    "ResponseFormat",
    "RetryPolicy",
    "Role",
    "Severity",
    "SqliteStore",
    "StateChanged",
    "StorageContention",
    "StorageError",
    "StoragePoolExhausted",
    "StorageTimeout",
    "StorageUnavailable",
    "Store",
    "Strategy",
    "StreamLimitExceeded",
    "StreamLimits",
    "TextDeltaEvent",
    "TextPart",
    "ThinksByDefault",
    "Tool",
    "ToolCallEvent",
    "ToolCallPart",
    "ToolHandler",
    "ToolResultEvent",
    "ToolResultPart",
    "ToolSpec",
    "TransientProviderError",
    "TransitionPart",
    "TransitionRefused",
    "Transport",
    "TurnAborted",
    "TurnAlreadyRecorded",
    "TurnCompleted",
    "TurnCost",
    "TurnEngine",
    "TurnEvent",
    "TurnFinished",
    "TurnInput",
    "TurnLimits",
    "TurnNotFound",
    "TurnStats",
    "TurnstateError",
    "UnknownModelPolicy",
    "Usage",
    "UserPart",
    "__version__",
    "chat_cost",
    "event_json",
    "message_cost",
    "open_store",
    "parse_envelope",
]


def __getattr__(name: str) -> Any:
    """``PostgresStore`` is imported on first use: asyncpg is the optional ``postgres``
    extra, and without it the import fails with a message that says so."""
    if name == "PostgresStore":
        from turnstate import storage  # noqa: PLC0415

        return storage.PostgresStore
    msg = f"module {__name__!r} has no attribute {name!r}"
    raise AttributeError(msg)
