"""List prices and minimum cacheable prompt lengths, as plain data.

USD per million tokens, read on the date given with each source. They are list prices
(standard tier, no batch discount; Gemini Pro's rates for prompts above 200,000 tokens
are its long-context tier); a deployment with other
rates replaces them with ``Registry.with_price``. Every figure is here once; the
registry attaches them to its models. Sources and dates: ``docs/decisions.md``
(2026-12-03, "Prices and cache minimums").
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

import attrs

from turnstate.core._cost import ModelPrice

ANTHROPIC_PRICING = "https://platform.claude.com/docs/en/about-claude/pricing"
OPENAI_PRICING = "https://platform.openai.com/docs/pricing"
GEMINI_PRICING = "https://ai.google.dev/gemini-api/docs/pricing"
DEEPSEEK_PRICING = "https://api-docs.deepseek.com/quick_start/pricing"
READ_ON = "2026-12-03"


ANTHROPIC_STANDARD_CONTEXT_TOKENS = 200_000
"""Anthropic's standard context window: a request above it runs in a long-context window
(a beta header and a ``context_limit`` set above the registry's 200,000) billed at
premium rates no source read here gives as Anthropic's own, so it has no price
(``ModelPrice.unpriced_above``; docs/decisions.md, 2026-12-05, money9)."""


def _anthropic(input_: str, output: str) -> ModelPrice:
    # Anthropic's multipliers: reads 0.1x, five-minute writes 1.25x, one-hour writes 2x.
    base = ModelPrice(input=input_, cached_input="0", output=output)
    return ModelPrice(input=base.input, cached_input=base.input / 10, output=base.output,
                      cache_write_5m=base.input * 5 / 4, cache_write_1h=base.input * 2,
                      source=ANTHROPIC_PRICING, read_on=READ_ON,
                      unpriced_above=ANTHROPIC_STANDARD_CONTEXT_TOKENS)


def _price(input_: str, cached: str, output: str, source: str) -> ModelPrice:
    return ModelPrice(input=input_, cached_input=cached, output=output, source=source,
                      read_on=READ_ON)


GEMINI_LONG_CONTEXT_TOKENS = 200_000
"""Gemini Pro bills a prompt above this many tokens at its long-context rates."""


def _long(price: ModelPrice, input_: str, cached: str, output: str) -> ModelPrice:
    return attrs.evolve(price, long_context_tokens=GEMINI_LONG_CONTEXT_TOKENS,
                        long_input=input_, long_cached_input=cached, long_output=output)


DEEPSEEK_READ_ON = "2026-12-05"
DEEPSEEK_PEAK_HOURS_UTC: tuple[tuple[int, int], ...] = ((1, 4), (6, 10))
DEEPSEEK_PEAK_WEEKDAYS: tuple[int, ...] = (1, 2, 3, 4, 5)
"""DeepSeek's peak hours, UTC, start inclusive and end exclusive, Monday to Friday
(``DEEPSEEK_PRICING`` since 2026-08-23: "Peak hours are 01:00 - 04:00 and 06:00 - 10:00
UTC, Monday through Friday, excluding Chinese public holidays. All other hours are
off-peak, including weekends and Chinese public holidays in full"). The hours are 09:00
to 18:00 in Beijing, the same calendar day, so the UTC weekday is Beijing's. The
holidays are set by China's State Council each year: none are listed here; an embedder
adds them as ``ModelPrice.off_peak_dates`` (docs/decisions.md, 2026-12-05, money10)."""


def _deepseek(input_: str, cached: str, output: str) -> tuple[ModelPrice, ModelPrice]:
    off_peak = ModelPrice(input=input_, cached_input=cached, output=output,
                          source=DEEPSEEK_PRICING, read_on=DEEPSEEK_READ_ON)
    peak = attrs.evolve(off_peak, input=off_peak.input * 2,
                        cached_input=off_peak.cached_input * 2, output=off_peak.output * 2)
    return off_peak, peak


DEEPSEEK_RATES: Mapping[str, tuple[ModelPrice, ModelPrice]] = MappingProxyType({
    "deepseek-flash": _deepseek("0.15", "0.003", "0.60"),
    "deepseek-v4-flash": _deepseek("0.15", "0.003", "0.60"),  # retired: served as Flash
    "deepseek-v4-pro": _deepseek("0.66", "0.022", "1.98"),
})
"""DeepSeek's documented rates per model as ``(off_peak, peak)`` (the page's latest
stored version: cache hit, cache miss, output; peak exactly twice off-peak). ``PRICES``
holds them as one ``ModelPrice`` per model, off-peak with its ``peak`` and the hours
(``deepseek_price``): each request is priced by the UTC hour it started
(docs/decisions.md, 2026-12-05, money9)."""


def deepseek_price(name: str) -> ModelPrice:
    """DeepSeek model ``name``'s rates as one ``ModelPrice``: off-peak, with the peak
    rates, ``DEEPSEEK_PEAK_HOURS_UTC`` and ``DEEPSEEK_PEAK_WEEKDAYS``."""
    off_peak, peak = DEEPSEEK_RATES[name]
    return attrs.evolve(off_peak, peak=peak, peak_hours_utc=DEEPSEEK_PEAK_HOURS_UTC,
                        peak_weekdays=DEEPSEEK_PEAK_WEEKDAYS)


DEEPSEEK_PRICED = ("deepseek-flash", "deepseek-v4-flash", "deepseek-v4-pro")
"""The DeepSeek names the pricing page lists (``deepseek-v4-flash``: its legacy name,
served and billed as Flash). ``deepseek-chat`` and ``deepseek-reasoner`` are not on it:
they stay unpriced (the registry calls them aliases of V4 Flash after DeepSeek's April
release notes, which the current pricing page does not repeat)."""

PRICES: Mapping[tuple[str, str], ModelPrice] = MappingProxyType({
    ("anthropic", "claude-sonnet-4-5"): _anthropic("3", "15"),
    ("anthropic", "claude-sonnet-4-6"): _anthropic("3", "15"),
    ("anthropic", "claude-opus-4-1"): _anthropic("15", "75"),
    ("anthropic", "claude-opus-4-6"): _anthropic("5", "25"),
    ("anthropic", "claude-haiku-4-5"): _anthropic("1", "5"),
    ("anthropic", "claude-3-5-haiku"): _anthropic("0.80", "4"),
    ("openai", "gpt-4o"): _price("2.50", "1.25", "10", OPENAI_PRICING),
    ("openai", "gpt-4o-mini"): _price("0.15", "0.075", "0.60", OPENAI_PRICING),
    ("openai", "gpt-4.1"): _price("2", "0.50", "8", OPENAI_PRICING),
    ("openai", "gpt-4.1-mini"): _price("0.40", "0.10", "1.60", OPENAI_PRICING),
    ("openai", "gpt-4.1-nano"): _price("0.10", "0.025", "0.40", OPENAI_PRICING),
    ("openai", "o3"): _price("2", "0.50", "8", OPENAI_PRICING),
    ("openai", "o4-mini"): _price("1.10", "0.275", "4.40", OPENAI_PRICING),
    ("openai", "gpt-5"): _price("1.25", "0.125", "10", OPENAI_PRICING),
    ("openai", "gpt-5-mini"): _price("0.25", "0.025", "2", OPENAI_PRICING),
    ("openai", "gpt-5-nano"): _price("0.05", "0.005", "0.40", OPENAI_PRICING),
    ("openai", "gpt-5.1"): _price("1.25", "0.125", "10", OPENAI_PRICING),
    ("openai-compatible", "gpt-4o"): _price("2.50", "1.25", "10", OPENAI_PRICING),
    ("openai-compatible", "gpt-4o-mini"): _price("0.15", "0.075", "0.60", OPENAI_PRICING),
    ("openai-compatible", "gpt-4.1-nano"): _price("0.10", "0.025", "0.40", OPENAI_PRICING),
    ("gemini", "gemini-2.5-flash"): _price("0.30", "0.03", "2.50", GEMINI_PRICING),
    ("gemini", "gemini-2.5-pro"): _long(_price("1.25", "0.125", "10", GEMINI_PRICING),
                                        "2.50", "0.25", "15"),
    ("gemini", "gemini-2.5-flash-lite"): _price("0.10", "0.01", "0.40", GEMINI_PRICING),
    ("gemini", "gemini-3-pro-preview"): _long(_price("2", "0.20", "12", GEMINI_PRICING),
                                              "4", "0.40", "18"),
    **{("deepseek", name): deepseek_price(name) for name in DEEPSEEK_PRICED},
})
"""List prices by ``(provider, model)``. Models left out (Grok, Llama on other hosts,
DeepSeek's ``deepseek-chat`` and ``deepseek-reasoner``) have no price: their cost is
None until an embedder sets one. DeepSeek's models are billed by the hour of the day
(peak and off-peak rates, ``DEEPSEEK_PRICING``): their price carries both
(``deepseek_price``) and each request is priced by when it started."""

SNAPSHOTS_BILLED_APART: frozenset[tuple[str, str]] = frozenset({
    ("openai", "gpt-4o-2024-05-13"),  # $5 / $15, no cache discount (gpt-4o: $2.50 / $10)
})
"""Dated model names that ``is_snapshot_of`` takes for a listed model but that the
provider bills at another price: unpriced (no price rather than the alias's)."""

ANTHROPIC_CACHE_MINIMUMS = "https://platform.claude.com/docs/en/build-with-claude/prompt-caching"

MIN_CACHE_TOKENS: Mapping[tuple[str, str], int] = MappingProxyType({
    ("anthropic", "claude-sonnet-4-5"): 1024,
    ("anthropic", "claude-sonnet-4-6"): 1024,
    ("anthropic", "claude-opus-4-1"): 1024,
    ("anthropic", "claude-haiku-4-5"): 4096,
    ("anthropic", "claude-3-5-haiku"): 2048,
})
"""Anthropic's minimum cacheable prompt length per model, in tokens: a breakpoint on a
shorter prefix caches nothing (``ANTHROPIC_CACHE_MINIMUMS``, read on ``READ_ON``)."""

DEFAULT_ANTHROPIC_MIN_CACHE_TOKENS = 1024
"""For an Anthropic model the registry does not know: the smallest documented minimum."""

OPENAI_PROMPT_CACHING = "https://platform.openai.com/docs/guides/prompt-caching"

OPENAI_EXTENDED_RETENTION: frozenset[str] = frozenset({
    "gpt-4.1", "gpt-5", "gpt-5-codex", "gpt-5.1", "gpt-5.1-codex", "gpt-5.1-codex-mini",
    "gpt-5.1-codex-max", "gpt-5.1-chat-latest", "gpt-5.2", "gpt-5.3-codex", "gpt-5.4",
})
"""OpenAI models that take ``prompt_cache_retention`` as ``in_memory`` or ``24h`` (the
prompt-caching guide's list, ``OPENAI_PROMPT_CACHING``, as quoted by Azure's copy and
the SDKs' ``PromptCacheRetention``, read 2026-12-05; their dated snapshots too). Not
gpt-4o, gpt-4.1-mini/nano, gpt-5-mini/nano or the o-series. Cache reads bill the same
under both retentions."""

OPENAI_24H_ONLY: frozenset[str] = frozenset({"gpt-5.5", "gpt-5.5-pro"})
"""OpenAI models whose prompt cache is kept 24 hours only (``in_memory`` is refused)."""
