"""DeepSeek (OpenAI-compatible Chat Completions with thinking): codec."""

from turnstate.providers.deepseek._codec import (
    DeepSeekAdapter,
    parse_response_body,
    read_deepseek_usage,
)

__all__ = [
    "DeepSeekAdapter",
    "parse_response_body",
    "read_deepseek_usage",
]
