"""Gemini Interactions: the durable-cursor codec (``previous_interaction_id``, steps
format)."""

from turnstate.providers.gemini_interactions._codec import (
    DEFAULT_BASE_URL,
    GeminiInteractionsAdapter,
    request_payload,
)
from turnstate.providers.gemini_interactions._errors import classify_body, classify_fields
from turnstate.providers.gemini_interactions._parser import (
    InteractionsStreamParser,
    parse_response_body,
)

__all__ = [
    "DEFAULT_BASE_URL",
    "GeminiInteractionsAdapter",
    "InteractionsStreamParser",
    "classify_body",
    "classify_fields",
    "parse_response_body",
    "request_payload",
]
