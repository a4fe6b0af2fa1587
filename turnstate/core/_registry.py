"""What turnstate knows about providers and models, as data.

The provider registry says which providers keep a durable cursor (and in which mode)
and how long a cursor lives; the model registry gives context limits and the few
per-model reasoning rules. Both are frozen values: a deployment derives its own with
``with_retention`` / ``with_model`` instead of patching globals.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from enum import StrEnum
from types import MappingProxyType

import attrs

from turnstate.core._cost import ModelPrice
from turnstate.core._envelope import Mode
from turnstate.core._errors import ConfigurationError
from turnstate.core._prices import DEFAULT_ANTHROPIC_MIN_CACHE_TOKENS, MIN_CACHE_TOKENS, PRICES


class ReasoningReplay(StrEnum):
    """Where a model's reasoning text must be sent back.

    ``none``: never (the model has no replayable reasoning).
    ``turn``: within the turn's tool loop only (DeepSeek V3.2 rules).
    ``tool_turns``: also in every later request, on assistant messages that made tool
        calls (DeepSeek V4 thinking mode).
    """

    NONE = "none"
    TURN = "turn"
    TOOL_TURNS = "tool_turns"


@attrs.frozen(kw_only=True)
class ProviderCapability:
    """How one provider continues a conversation.

    Attributes:
        name: the registry name used in envelopes and ``TurnInput.provider``.
        mode: ``responses`` / ``interactions`` for durable cursors, ``stateless-loop`` otherwise.
        retention: how long a stored cursor lives at the provider; None when it has none.
    """

    name: str
    mode: Mode
    retention: timedelta | None = None

    @property
    def durable(self) -> bool:
        return self.mode.durable


@attrs.frozen(kw_only=True)
class ModelInfo:
    """One model's context limit, reasoning rules, list price, cache minimum and
    compaction support.

    Attributes:
        price: list prices (None: unpriced, so a turn's cost is None).
        min_cache_tokens: the shortest prefix the provider caches behind an explicit
            breakpoint (Anthropic); 0 where caching is implicit.
        compaction: the provider compacts this model's context on request where that
            is opt-in per model (Anthropic's ``compact_20260112``; OpenAI Responses
            takes ``context_management`` for every model, Gemini compacts on its own).
    """

    provider: str
    name: str
    context_limit: int
    reasoning_replay: ReasoningReplay = ReasoningReplay.NONE
    thinking: bool = False
    price: ModelPrice | None = None
    min_cache_tokens: int = 0
    compaction: bool = False


def is_snapshot_of(produced: str, requested: str) -> bool:
    """Whether model name ``produced`` is ``requested`` or a dated snapshot of it.

    Providers report dated snapshots of the model asked for (``claude-sonnet-4-5-20250929``
    for ``claude-sonnet-4-5``, ``gpt-4.1-nano-2025-04-14`` for ``gpt-4.1-nano``): a dash
    followed by a digit after the requested name counts as the same model.
    """
    if produced == requested:
        return True
    if not requested or not produced.startswith(requested + "-"):
        return False
    return produced[len(requested) + 1 : len(requested) + 2].isdigit()


UNKNOWN_MODEL_REPLAY: Mapping[str, ReasoningReplay] = MappingProxyType({
    # DeepSeek's current thinking-mode guide: thinking is on by default for every V4
    # model, and a tool turn's reasoning_content must go back in all later requests.
    "deepseek": ReasoningReplay.TOOL_TURNS,
})
"""The reasoning rules of a model the registry does not know, per provider."""


def _freeze(mapping: Mapping[str, ProviderCapability]) -> Mapping[str, ProviderCapability]:
    return MappingProxyType(dict(mapping))


def _freeze_models(
    mapping: Mapping[tuple[str, str], ModelInfo],
) -> Mapping[tuple[str, str], ModelInfo]:
    return MappingProxyType(dict(mapping))


@attrs.frozen
class Registry:
    """Providers and models. ``DEFAULT_REGISTRY`` holds the well-known ones."""

    providers: Mapping[str, ProviderCapability] = attrs.field(converter=_freeze)
    models: Mapping[tuple[str, str], ModelInfo] = attrs.field(converter=_freeze_models)
    default_context_limit: int = 128_000

    def provider(self, name: str) -> ProviderCapability:
        """The capability of ``name``.

        Raises:
            ConfigurationError: the provider is unknown.
        """
        try:
            return self.providers[name]
        except KeyError:
            msg = f"unknown provider {name!r}; known: {sorted(self.providers)}"
            raise ConfigurationError(msg) from None

    def model(self, provider: str, name: str) -> ModelInfo:
        """The model's info.

        A dated or versioned name (``deepseek-v4-flash-0701``,
        ``deepseek-reasoner-2026-01-01``: a known name, a dash, then a digit) gets its
        known model's rules under its own name. Other unknown models get the default
        context limit and their provider's default reasoning rules
        (``UNKNOWN_MODEL_REPLAY``).
        """
        found = self.models.get((provider, name))
        if found is not None:
            return found
        base = max((info for (owner, known), info in self.models.items()
                    if owner == provider and is_snapshot_of(name, known)),
                   key=lambda info: len(info.name), default=None)
        if base is not None:
            return attrs.evolve(base, name=name)
        minimum = DEFAULT_ANTHROPIC_MIN_CACHE_TOKENS if provider == "anthropic" else 0
        return ModelInfo(provider=provider, name=name, context_limit=self.default_context_limit,
                         min_cache_tokens=minimum,
                         reasoning_replay=UNKNOWN_MODEL_REPLAY.get(provider,
                                                                   ReasoningReplay.NONE))

    def with_retention(self, provider: str, retention: timedelta | None) -> Registry:
        """A registry where ``provider``'s cursors live for ``retention``."""
        updated = attrs.evolve(self.provider(provider), retention=retention)
        return attrs.evolve(self, providers={**self.providers, provider: updated})

    def with_model(self, info: ModelInfo) -> Registry:
        """A registry that knows ``info`` (replacing an entry of the same name)."""
        return attrs.evolve(self, models={**self.models, (info.provider, info.name): info})

    def with_price(self, provider: str, name: str, price: ModelPrice | None) -> Registry:
        """A registry where the model bills at ``price`` (None: unpriced).

        Unknown models are added with the default context limit, so an embedder can
        price a model the registry does not list.
        """
        return self.with_model(attrs.evolve(self.model(provider, name), price=price))

    def with_default_context_limit(self, limit: int) -> Registry:
        """A registry whose unknown models get ``limit`` tokens of context.

        Raises:
            ConfigurationError: ``limit`` is not positive.
        """
        if limit <= 0:
            msg = "the default context limit must be positive"
            raise ConfigurationError(msg)
        return attrs.evolve(self, default_context_limit=limit)


_PROVIDERS = (
    ProviderCapability(name="openai", mode=Mode.RESPONSES, retention=timedelta(days=30)),
    # Retention of stored interactions is not documented in the wire reference; 55 days
    # is the paid-tier figure. A cursor that dies earlier is caught by the provider's own
    # error and costs one replay (docs/decisions.md, 2026-12-02).
    ProviderCapability(name="gemini", mode=Mode.INTERACTIONS, retention=timedelta(days=55)),
    ProviderCapability(name="openai-compatible", mode=Mode.STATELESS_LOOP),
    ProviderCapability(name="anthropic", mode=Mode.STATELESS_LOOP),
    ProviderCapability(name="deepseek", mode=Mode.STATELESS_LOOP),
)


def _m(provider: str, name: str, limit: int, **kw: object) -> ModelInfo:
    info = ModelInfo(provider=provider, name=name, context_limit=limit, **kw)  # type: ignore[arg-type]
    return attrs.evolve(info, price=PRICES.get((provider, name)),
                        min_cache_tokens=MIN_CACHE_TOKENS.get((provider, name), 0))


_MODELS = (
    _m("openai", "gpt-4o", 128_000),
    _m("openai", "gpt-4o-mini", 128_000),
    _m("openai", "gpt-4.1", 1_047_576),
    _m("openai", "gpt-4.1-mini", 1_047_576),
    _m("openai", "gpt-4.1-nano", 1_047_576),
    _m("openai", "o3", 200_000),
    _m("openai", "o4-mini", 200_000),
    _m("openai", "gpt-5", 400_000),
    _m("openai", "gpt-5-mini", 400_000),
    _m("openai", "gpt-5-nano", 400_000),
    _m("openai", "gpt-5.1", 400_000),
    _m("gemini", "gemini-2.5-flash", 1_048_576),
    _m("gemini", "gemini-2.5-pro", 1_048_576),
    _m("gemini", "gemini-2.5-flash-lite", 1_048_576),
    _m("gemini", "gemini-3-pro-preview", 1_048_576),
    _m("openai-compatible", "gpt-4o", 128_000),
    _m("openai-compatible", "gpt-4o-mini", 128_000),
    _m("openai-compatible", "gpt-4.1-nano", 1_047_576),
    _m("openai-compatible", "grok-3-mini", 131_072),
    _m("openai-compatible", "llama-3.3-70b", 131_072),
    _m("anthropic", "claude-sonnet-4-5", 200_000, thinking=True),
    # compact_20260112 (beta compact-2026-01-12): the models Anthropic's threshold
    # compaction page lists that this registry knows (docs/decisions.md, 2026-12-03).
    _m("anthropic", "claude-sonnet-4-6", 200_000, thinking=True, compaction=True),
    _m("anthropic", "claude-opus-4-6", 200_000, thinking=True, compaction=True),
    _m("anthropic", "claude-opus-4-1", 200_000, thinking=True),
    _m("anthropic", "claude-haiku-4-5", 200_000, thinking=True),
    _m("anthropic", "claude-3-5-haiku", 200_000),
    # deepseek-chat and deepseek-reasoner are aliases of deepseek-v4-flash with thinking
    # off and on (DeepSeek's V4 release notes, 2026-04-24); the V4 rules apply to both.
    _m("deepseek", "deepseek-chat", 1_000_000),
    _m("deepseek", "deepseek-reasoner", 1_000_000, thinking=True,
       reasoning_replay=ReasoningReplay.TOOL_TURNS),
    _m("deepseek", "deepseek-v4-flash", 1_000_000, thinking=True,
       reasoning_replay=ReasoningReplay.TOOL_TURNS),
    _m("deepseek", "deepseek-v4-pro", 1_000_000, thinking=True,
       reasoning_replay=ReasoningReplay.TOOL_TURNS),
)

DEFAULT_REGISTRY = Registry(
    providers={p.name: p for p in _PROVIDERS},
    models={(m.provider, m.name): m for m in _MODELS},
)
