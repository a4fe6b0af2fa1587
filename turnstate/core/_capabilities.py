"""What each provider and model accepts: settings, output limits, sampling, reasoning
efforts, thinking budgets and input parts, as data the registry reads.

Figures are the providers' documented ones as read on 2026-12-03 (docs/decisions.md, with
the table of what was checked against which page):
OpenAI's model pages (output limits; o-series and GPT-5 take no temperature or top_p,
and take ``reasoning.effort``), Anthropic's models overview (output limits, temperature
0 to 1, a thinking budget of at least 1,024 tokens), Gemini's ``generation_config``
(``thinking_level`` on Gemini 3), DeepSeek's thinking-mode guide (``reasoning_effort``;
no ``temperature`` or ``top_p`` in thinking mode).
A deployment that sees otherwise derives its own registry with ``Registry.with_model``.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

IMAGE = "image"
FILE = "file"

PROVIDER_SETTINGS: Mapping[str, frozenset[str]] = MappingProxyType({
    "openai": frozenset({"max_output_tokens", "temperature", "top_p", "reasoning_effort",
                         "tool_choice", "parallel_tool_calls", "metadata", "response_format"}),
    "gemini": frozenset({"max_output_tokens", "temperature", "top_p", "reasoning_effort",
                         "tool_choice", "stop", "seed", "response_format"}),
    "openai-compatible": frozenset({"max_output_tokens", "temperature", "top_p",
                                    "reasoning_effort", "tool_choice", "stop",
                                    "parallel_tool_calls", "seed", "response_format"}),
    "deepseek": frozenset({"max_output_tokens", "temperature", "top_p", "reasoning_effort",
                           "tool_choice", "stop", "response_format"}),
    "anthropic": frozenset({"max_output_tokens", "temperature", "top_p",
                            "reasoning_budget_tokens", "tool_choice", "stop",
                            "parallel_tool_calls", "metadata", "response_format"}),
})
"""The ``GenerationSettings`` fields each provider's adapter carries onto the wire."""

MIN_OUTPUT_TOKENS: Mapping[str, int] = MappingProxyType({"openai": 16})
"""The least ``max_output_tokens`` a provider takes, where it is above 1: OpenAI
Responses refuses less with a 400 ("Invalid 'max_output_tokens': integer below minimum
value. Expected a value >= 16", code ``integer_below_min_value``), so a lower limit is
refused before the lease instead (embed5)."""

METADATA_KEYS: Mapping[str, Mapping[str, int]] = MappingProxyType({
    "anthropic": MappingProxyType({"user_id": 256}),
})
"""Providers whose ``metadata`` is a fixed object: the keys they take and each value's
longest length (Anthropic's Messages API: ``metadata.user_id`` alone, at most 256
characters; any other key is refused with a 400). Others take free pairs."""

MEDIA_LIMITS: Mapping[str, Mapping[str, int]] = MappingProxyType({
    "anthropic": MappingProxyType({"image": 10_485_760, "request": 32_000_000,
                                   "images": 100}),
    "openai": MappingProxyType({"image": 27_962_028, "request": 50_000_000,
                                "images": 500}),
    "openai-compatible": MappingProxyType({"image": 27_962_028, "request": 50_000_000,
                                           "images": 500}),
})
"""Per provider, the most base64 characters one inline image (``image``) and one turn's
inline images and files together (``request``) may take on the wire. Anthropic measures
an image on its base64 (its 400 reads "image exceeds 10 MB maximum: 11174516 bytes >
10485760 bytes", the limit since mid-2026; 5 MB before) and documents a 32 MB request;
OpenAI documents 50 MB of files per request. A part past them would fail the turn's
request with a 400, so the engine refuses it before the lease. ``images``: the most
images (inline or by URL) one request may carry, the turn's and its replayed history's
together: Anthropic's vision guide, "100 per request on the API, for models with a
200k-token context window" (600 for others; the lower one is kept for all); a replay
leaves the oldest out past it (``core._media_fit``). OpenAI's "Images and vision" guide:
"Up to 20MB per image" (a 20 MiB file's 27,962,028 base64 characters, as the emulators
measure it; the 20 MiB a turn takes by default fits), "Up to 500 individual images per
request", "Up to 50 MB image bytes per request" (50,000,000 base64 characters, the
stricter reading), for Responses and for Chat Completions (``openai-compatible``:
OpenAI's wire; other servers of it document their own, mostly lower, limits) (wire9)."""

FILE_URL_REFUSED = frozenset({"openai-compatible", "deepseek"})
"""Providers whose wire has no file URL (Chat Completions' ``file`` part takes only
``file_data``): a ``FilePart(url=...)`` sent to them now is refused rather than replaced
by its placeholder text (a stored one replayed after a provider switch still is)."""

_EFFORTS_O = frozenset({"low", "medium", "high"})
_EFFORTS_GPT5 = frozenset({"minimal", "low", "medium", "high"})
_EFFORTS_TWO = frozenset({"low", "high"})
_EFFORTS_GPT51 = frozenset({"none", "low", "medium", "high"})
"""OpenAI's ``reasoning.effort`` reference: "gpt-5.1 defaults to none, which does not
perform reasoning. The supported reasoning values for gpt-5.1 are none, low, medium, and
high"; models before it "do not support none" (docs/decisions.md)."""
_VISION = frozenset({IMAGE, FILE})

_PROVIDER_DEFAULTS: Mapping[str, Mapping[str, Any]] = MappingProxyType({
    "openai": {"max_output_tokens": 16_384, "inputs": _VISION},
    "gemini": {"max_output_tokens": 65_536, "inputs": _VISION},
    "openai-compatible": {"max_output_tokens": 16_384},
    # DeepSeek's Models & Pricing page (V4): 1M context, "MAX OUTPUT MAXIMUM: 384K" for
    # deepseek-v4-flash and -pro; deepseek-chat / -reasoner are V4-Flash aliases.
    "deepseek": {"max_output_tokens": 384_000},
    "anthropic": {"max_output_tokens": 64_000, "max_temperature": 1.0, "inputs": _VISION},
})

_REASONING_O = {"sampling": False, "reasoning_efforts": _EFFORTS_O, "max_output_tokens": 100_000}
_REASONING_GPT5 = {"sampling": False, "reasoning_efforts": _EFFORTS_GPT5,
                   "max_output_tokens": 128_000}
_THINKING = {"min_thinking_budget": 1_024, "one_sampler": True}
"""Claude 4.x with extended thinking. These models also refuse ``temperature`` and
``top_p`` in one request with a 400 ("temperature and top_p cannot both be specified for
this model. Please use only one."): Anthropic's docs state no rule, the API's own error
does (reported for Sonnet 4.5, Haiku 4.5, Opus 4.1 and later; docs/decisions.md)."""
_DEEPSEEK_THINKING = {"reasoning_efforts": _EFFORTS_TWO, "sampling": False}
"""DeepSeek in thinking mode: its guide says thinking mode does not support
``temperature`` or ``top_p`` and ignores them without an error, so a turn that set one
would silently sample as if it had not: refused instead (docs/decisions.md)."""

_MODELS: Mapping[tuple[str, str], Mapping[str, Any]] = MappingProxyType({
    ("openai", "gpt-4.1"): {"max_output_tokens": 32_768},
    ("openai", "gpt-4.1-mini"): {"max_output_tokens": 32_768},
    ("openai", "gpt-4.1-nano"): {"max_output_tokens": 32_768},
    ("openai", "o3"): _REASONING_O,
    ("openai", "o4-mini"): _REASONING_O,
    ("openai", "gpt-5"): _REASONING_GPT5,
    ("openai", "gpt-5-mini"): _REASONING_GPT5,
    ("openai", "gpt-5-nano"): _REASONING_GPT5,
    ("openai", "gpt-5.1"): {**_REASONING_GPT5, "reasoning_efforts": _EFFORTS_GPT51},
    ("gemini", "gemini-3-pro-preview"): {"reasoning_efforts": _EFFORTS_TWO},
    # OpenAI's vision models on Chat Completions take images and PDFs (a ``file`` part
    # with ``file_data``; no file URL): the "File inputs" guide (embed5).
    ("openai-compatible", "gpt-4o"): {"inputs": _VISION},
    ("openai-compatible", "gpt-4o-mini"): {"inputs": _VISION},
    ("openai-compatible", "gpt-4.1-nano"): {"inputs": _VISION, "max_output_tokens": 32_768},
    ("openai-compatible", "grok-3-mini"): {"reasoning_efforts": _EFFORTS_TWO},
    ("anthropic", "claude-sonnet-4-5"): _THINKING,
    ("anthropic", "claude-sonnet-4-6"): _THINKING,
    ("anthropic", "claude-opus-4-6"): {**_THINKING, "max_output_tokens": 128_000},
    ("anthropic", "claude-opus-4-1"): {**_THINKING, "max_output_tokens": 32_000},
    ("anthropic", "claude-haiku-4-5"): _THINKING,
    ("anthropic", "claude-3-5-haiku"): {"max_output_tokens": 8_192},
    ("deepseek", "deepseek-reasoner"): _DEEPSEEK_THINKING,
    ("deepseek", "deepseek-v4-flash"): _DEEPSEEK_THINKING,
    ("deepseek", "deepseek-v4-pro"): _DEEPSEEK_THINKING,
})

UNKNOWN_MODEL_LIMITS: Mapping[str, Any] = MappingProxyType({
    "max_output_tokens": 4_096, "inputs": frozenset(), "reasoning_efforts": frozenset(),
    "min_thinking_budget": 0,
})
"""What a model the registry does not know may do under the lenient policy: a short
answer, text only, no reasoning settings (conservative: a real request may then be
refused by turnstate, never by the provider in the middle of a turn)."""


def capabilities(provider: str, name: str) -> dict[str, Any]:
    """The ``ModelInfo`` fields of a known model beyond its context limit."""
    return {**_PROVIDER_DEFAULTS.get(provider, {}), **_MODELS.get((provider, name), {})}
