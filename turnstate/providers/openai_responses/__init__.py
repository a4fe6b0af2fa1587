"""OpenAI Responses: the durable-cursor codec (``previous_response_id``)."""

from turnstate.providers.openai_responses._assemble import parse_response_body
from turnstate.providers.openai_responses._codec import (
    DEFAULT_BASE_URL,
    OpenAIResponsesAdapter,
    request_payload,
)
from turnstate.providers.openai_responses._errors import classify_body, classify_fields
from turnstate.providers.openai_responses._parser import ResponsesStreamParser

__all__ = [
    "DEFAULT_BASE_URL",
    "OpenAIResponsesAdapter",
    "ResponsesStreamParser",
    "classify_body",
    "classify_fields",
    "parse_response_body",
    "request_payload",
]
