"""OpenAI-compatible Chat Completions: codec and stream parser."""

from turnstate.providers.chat_completions._codec import (
    ChatCompletionsAdapter,
    ReasoningPolicy,
    ReasoningRule,
    render_parts,
    render_parts_json,
    render_tools,
)
from turnstate.providers.chat_completions._dialect import DIALECTS, ChatDialect
from turnstate.providers.chat_completions._stream import (
    ChatCompletionsStreamParser,
    parse_response_body,
)

__all__ = [
    "DIALECTS",
    "ChatCompletionsAdapter",
    "ChatCompletionsStreamParser",
    "ChatDialect",
    "ReasoningPolicy",
    "ReasoningRule",
    "parse_response_body",
    "render_parts",
    "render_parts_json",
    "render_tools",
]
