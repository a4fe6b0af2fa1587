"""Anthropic Messages: codec and stream parser."""

from turnstate.providers.anthropic._blocks import merge_roles, render_parts, render_parts_blocks
from turnstate.providers.anthropic._codec import AnthropicAdapter
from turnstate.providers.anthropic._stream import AnthropicStreamParser, parse_response_body

__all__ = [
    "AnthropicAdapter",
    "AnthropicStreamParser",
    "merge_roles",
    "parse_response_body",
    "render_parts",
    "render_parts_blocks",
]
