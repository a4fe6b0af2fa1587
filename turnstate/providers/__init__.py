"""Provider codecs (sans-IO), the shared aiohttp transport, and the emulators."""

from turnstate.providers._emulator import (
    EmulatorBase,
    EmulatorServer,
    Fault,
    FaultPlan,
    RecordedRequest,
    Reply,
    ScriptedCall,
    ScriptedModel,
)
from turnstate.providers._protocol import (
    ErrorClassifier,
    HttpRequest,
    ProviderAdapter,
    ProviderCall,
    ProviderEvent,
    ProviderResponse,
    ReasoningDelta,
    SseEvent,
    StreamParser,
    TextDelta,
    Transport,
)

__all__ = [
    "EmulatorBase",
    "EmulatorServer",
    "ErrorClassifier",
    "Fault",
    "FaultPlan",
    "HttpRequest",
    "ProviderAdapter",
    "ProviderCall",
    "ProviderEvent",
    "ProviderResponse",
    "ReasoningDelta",
    "RecordedRequest",
    "Reply",
    "ScriptedCall",
    "ScriptedModel",
    "SseEvent",
    "StreamParser",
    "TextDelta",
    "Transport",
]
