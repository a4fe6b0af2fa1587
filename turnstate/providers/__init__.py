"""Provider codecs (sans-IO), the shared aiohttp transport, and the emulators."""

from turnstate.providers._emulator import (
    EmulatorBase,
    EmulatorServer,
    Fault,
    FaultPlan,
    Item,
    RecordedRequest,
    Reply,
    ScriptedCall,
    ScriptedModel,
    items_from_messages,
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
from turnstate.providers._sse import SseDecoder
from turnstate.providers._transport import AiohttpTransport, RetryPolicy, StreamLimits
from turnstate.providers.anthropic import AnthropicAdapter, AnthropicEmulator
from turnstate.providers.chat_completions import ChatCompletionsAdapter, ChatCompletionsEmulator
from turnstate.providers.deepseek import DeepSeekAdapter, DeepSeekEmulator
from turnstate.providers.emulated import PROVIDER_KINDS, EmulatedProviders
from turnstate.providers.gemini_interactions import (
    GeminiInteractionsAdapter,
    GeminiInteractionsEmulator,
)
from turnstate.providers.openai_responses import OpenAIResponsesAdapter, OpenAIResponsesEmulator
from turnstate.providers.scripted import ScriptedAdapter, ScriptedBackend, ScriptStep

__all__ = [
    "PROVIDER_KINDS",
    "AiohttpTransport",
    "AnthropicAdapter",
    "AnthropicEmulator",
    "ChatCompletionsAdapter",
    "ChatCompletionsEmulator",
    "DeepSeekAdapter",
    "DeepSeekEmulator",
    "EmulatedProviders",
    "EmulatorBase",
    "EmulatorServer",
    "ErrorClassifier",
    "Fault",
    "FaultPlan",
    "GeminiInteractionsAdapter",
    "GeminiInteractionsEmulator",
    "HttpRequest",
    "Item",
    "OpenAIResponsesAdapter",
    "OpenAIResponsesEmulator",
    "ProviderAdapter",
    "ProviderCall",
    "ProviderEvent",
    "ProviderResponse",
    "ReasoningDelta",
    "RecordedRequest",
    "Reply",
    "RetryPolicy",
    "ScriptStep",
    "ScriptedAdapter",
    "ScriptedBackend",
    "ScriptedCall",
    "ScriptedModel",
    "SseDecoder",
    "SseEvent",
    "StreamLimits",
    "StreamParser",
    "TextDelta",
    "Transport",
    "items_from_messages",
]
