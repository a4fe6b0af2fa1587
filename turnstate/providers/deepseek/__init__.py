"""DeepSeek (OpenAI-compatible Chat Completions with thinking): codec and emulator."""

from turnstate.providers.deepseek._codec import (
    DeepSeekAdapter,
    parse_response_body,
    read_deepseek_usage,
)
from turnstate.providers.deepseek._emulator import DeepSeekEmulator, PrefixCache, RuleSet, rule_set

__all__ = [
    "DeepSeekAdapter",
    "DeepSeekEmulator",
    "PrefixCache",
    "RuleSet",
    "parse_response_body",
    "read_deepseek_usage",
    "rule_set",
]
