"""What production runs: the provider codecs (sans-IO), the shared aiohttp transport,
the boundary and the secret scrubber. The emulators live in ``turnstate.emulators``."""

from collections.abc import Callable

from turnstate.providers._protocol import (
    ErrorClassifier,
    HttpRequest,
    ImageOutput,
    ProviderAdapter,
    ProviderCall,
    ProviderEvent,
    ProviderResponse,
    ReasoningDelta,
    SseEvent,
    StreamParser,
    TextDelta,
    ThinksByDefault,
    Transport,
)
from turnstate.providers._sse import SseDecoder
from turnstate.providers._transport import AiohttpTransport
from turnstate.providers._transport_settings import (
    DrainLimits,
    PoolLimits,
    RetryPolicy,
    StreamLimits,
)
from turnstate.providers.anthropic import AnthropicAdapter
from turnstate.providers.chat_completions import ChatCompletionsAdapter
from turnstate.providers.deepseek import DeepSeekAdapter
from turnstate.providers.gemini_interactions import GeminiInteractionsAdapter
from turnstate.providers.openai_responses import OpenAIResponsesAdapter

ADAPTERS: dict[str, Callable[..., ProviderAdapter]] = {
    "openai": OpenAIResponsesAdapter,
    "gemini": GeminiInteractionsAdapter,
    "openai-compatible": ChatCompletionsAdapter,
    "deepseek": DeepSeekAdapter,
    "anthropic": AnthropicAdapter,
}
"""The adapter class of each provider name, in the order the tools list them."""

__all__ = [
    "ADAPTERS",
    "AiohttpTransport",
    "AnthropicAdapter",
    "ChatCompletionsAdapter",
    "DeepSeekAdapter",
    "DrainLimits",
    "ErrorClassifier",
    "GeminiInteractionsAdapter",
    "HttpRequest",
    "ImageOutput",
    "OpenAIResponsesAdapter",
    "PoolLimits",
    "ProviderAdapter",
    "ProviderCall",
    "ProviderEvent",
    "ProviderResponse",
    "ReasoningDelta",
    "RetryPolicy",
    "SseDecoder",
    "SseEvent",
    "StreamLimits",
    "StreamParser",
    "TextDelta",
    "ThinksByDefault",
    "Transport",
]
