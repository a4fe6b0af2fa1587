"""The provider emulators, the scripted model and ``EmulatedProviders``.

None of this runs in production: it is what the tests, ``turnstate demo``, ``turnstate
emulate`` and ``turnstate serve`` (without ``--live``) talk to instead of the real APIs.
Each emulator is an aiohttp application speaking one provider's real wire format, with
faults a test can queue and a log of the requests it received. ``turnstate.providers``
never imports this package (the layer test holds it to that).
"""

from turnstate.emulators._anthropic import AnthropicEmulator
from turnstate.emulators._base import (
    ChainedEmulator,
    EmulatorBase,
    EmulatorServer,
    Fault,
    FaultPlan,
    Item,
    RecordedRequest,
    Reply,
    RequestLog,
    ScriptedCall,
    ScriptedModel,
    items_from_messages,
)
from turnstate.emulators._chat_completions import ChatCompletionsEmulator
from turnstate.emulators._deepseek import DeepSeekEmulator, PrefixCache, RuleSet, rule_set
from turnstate.emulators._emulated import (
    EMULATOR_API_KEY,
    PROVIDER_KINDS,
    EmulatedProviders,
    ProviderKind,
    kind_of,
)
from turnstate.emulators._gemini import GeminiInteractionsEmulator, StoredInteraction
from turnstate.emulators._responses import OpenAIResponsesEmulator, StoredResponse
from turnstate.emulators._scripted import ScriptedAdapter, ScriptedBackend, ScriptStep

__all__ = [
    "EMULATOR_API_KEY",
    "PROVIDER_KINDS",
    "AnthropicEmulator",
    "ChainedEmulator",
    "ChatCompletionsEmulator",
    "DeepSeekEmulator",
    "EmulatedProviders",
    "EmulatorBase",
    "EmulatorServer",
    "Fault",
    "FaultPlan",
    "GeminiInteractionsEmulator",
    "Item",
    "OpenAIResponsesEmulator",
    "PrefixCache",
    "ProviderKind",
    "RecordedRequest",
    "Reply",
    "RequestLog",
    "RuleSet",
    "ScriptStep",
    "ScriptedAdapter",
    "ScriptedBackend",
    "ScriptedCall",
    "ScriptedModel",
    "StoredInteraction",
    "StoredResponse",
    "items_from_messages",
    "kind_of",
    "rule_set",
]
