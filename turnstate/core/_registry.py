"""What turnstate knows about providers and models, as data.

The provider registry says which providers keep a durable cursor (and in which mode)
and how long a cursor lives; the model registry gives context limits and the few
per-model reasoning rules. Both are frozen values: a deployment derives its own with
``with_retention`` / ``with_model`` instead of patching globals.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterable, Mapping
from datetime import timedelta
from enum import StrEnum
from types import MappingProxyType

import attrs

from turnstate.core._capabilities import (
    MIN_OUTPUT_TOKENS,
    PROVIDER_SETTINGS,
    UNKNOWN_MODEL_LIMITS,
    capabilities,
)
from turnstate.core._cost import ModelPrice
from turnstate.core._envelope import Mode
from turnstate.core._errors import ConfigurationError, InvalidInput
from turnstate.core._prices import (
    DEFAULT_ANTHROPIC_MIN_CACHE_TOKENS,
    MIN_CACHE_TOKENS,
    PRICES,
    SNAPSHOTS_BILLED_APART,
)
from turnstate.core._registry_checks import (
    check_context_limit,
    check_retention,
    member,
    model_fields_problem,
)

logger = logging.getLogger("turnstate")


def _names(value: Iterable[str]) -> frozenset[str]:
    return frozenset(value)


class UnknownModelPolicy(StrEnum):
    """What ``Registry.model`` does with a model it does not know.

    ``lenient`` (the default): warn once per model in the log and use conservative
        limits (``core._capabilities.UNKNOWN_MODEL_LIMITS``); the turn's audit says
        ``modelKnown: false``.
    ``strict``: refuse it with ``InvalidInput`` naming the model, before the lease.
    """

    LENIENT = "lenient"
    STRICT = "strict"


class ReasoningReplay(StrEnum):
    """Where a model's reasoning text must be sent back.

    ``none``: never (the model has no replayable reasoning).
    ``turn``: within the turn's tool loop only (DeepSeek V3.2 rules).
    ``tool_turns``: also in every later request, on assistant messages that made tool
        calls (DeepSeek V4 thinking mode).
    ``all``: every earlier turn's reasoning the model made goes back as it was made,
        where the model keeps it in context (Anthropic: Claude Opus 4.5 and later keep
        the thinking blocks of earlier turns, which older models drop; sent, they also
        keep each request a byte prefix of the next, so the prompt cache holds).
    """

    NONE = "none"
    TURN = "turn"
    TOOL_TURNS = "tool_turns"
    ALL = "all"


def _mode(value: Mode | str) -> Mode:
    return member(Mode, value, "a provider's mode")


def _policy(value: UnknownModelPolicy | str) -> UnknownModelPolicy:
    return member(UnknownModelPolicy, value, "unknown_models")


@attrs.frozen(kw_only=True)
class ProviderCapability:
    """How one provider continues a conversation.

    Attributes:
        name: the registry name used in envelopes and ``TurnInput.provider``.
        mode: ``responses`` / ``interactions`` for durable cursors, ``stateless-loop`` otherwise.
        retention: how long a stored cursor lives at the provider; None when it has none.
    """

    name: str
    mode: Mode = attrs.field(converter=_mode)
    retention: timedelta | None = attrs.field(default=None, validator=check_retention)
    settings: frozenset[str] = attrs.field(default=frozenset(), converter=_names)
    """The ``GenerationSettings`` fields the provider's adapter carries."""
    min_output_tokens: int = 1
    """The least ``max_output_tokens`` the provider takes (OpenAI Responses: 16)."""

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
            takes ``context_management`` for every model; DESIGN.md says Gemini
            compacts on its own, but the Interactions reference documents no compaction,
            so a Gemini cursor that outgrows the window degrades ``context_overflow``).
    """

    provider: str
    name: str
    context_limit: int
    reasoning_replay: ReasoningReplay = ReasoningReplay.NONE
    thinking: bool = False
    price: ModelPrice | None = None
    min_cache_tokens: int = 0
    compaction: bool = False
    max_output_tokens: int = 4_096
    """The most tokens one answer may take (``GenerationSettings.max_output_tokens``)."""
    sampling: bool = True
    """Takes ``temperature`` and ``top_p`` (reasoning models do not)."""
    max_temperature: float = 2.0
    one_sampler: bool = False
    """Takes ``temperature`` or ``top_p`` in one request, not both (Claude 4.x from Opus
    4.1 and Sonnet 4.5 on)."""
    reasoning_efforts: frozenset[str] = attrs.field(default=frozenset(), converter=_names)
    """The ``reasoning_effort`` values the model takes (empty: none)."""
    min_thinking_budget: int = 0
    """The smallest ``reasoning_budget_tokens`` (0: the model takes no budget)."""
    inputs: frozenset[str] = attrs.field(default=frozenset(), converter=_names)
    """User part types besides text: ``image``, ``file`` (PDF)."""
    known: bool = True
    """False for a model the registry made up under the lenient policy."""


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
    """The registry's models, each checked (``model_problem``) where it enters: a bad
    figure failed every turn of the model deep inside, some after the provider had
    answered and billed.

    Raises:
        ConfigurationError: naming the model and the field.
    """
    frozen = MappingProxyType(dict(mapping))
    for info in frozen.values():
        problem = model_problem(info)
        if problem is not None:
            raise ConfigurationError(problem)
    return frozen


_REPLAYS = frozenset(ReasoningReplay)


def model_problem(info: object) -> str | None:
    """What makes ``info`` unusable as a registry entry, naming the field, or None
    (``_registry_checks.model_fields_problem`` checks the fields)."""
    if not isinstance(info, ModelInfo):
        return f"a registry model must be a ModelInfo, got {type(info).__name__}"
    return model_fields_problem(info, _REPLAYS)


@attrs.frozen
class Registry:
    """Providers and models. ``DEFAULT_REGISTRY`` holds the well-known ones."""

    providers: Mapping[str, ProviderCapability] = attrs.field(converter=_freeze)
    models: Mapping[tuple[str, str], ModelInfo] = attrs.field(converter=_freeze_models)
    default_context_limit: int = attrs.field(default=128_000, validator=check_context_limit)
    unknown_models: UnknownModelPolicy = attrs.field(default=UnknownModelPolicy.LENIENT,
                                                     converter=_policy)

    def provider(self, name: str) -> ProviderCapability:
        """The capability of ``name``.

        Raises:
            ConfigurationError: the provider is unknown.
        """
        try:
            return self.providers[name]
        except KeyError:
            msg = (f"unknown provider {name!r}; known: {sorted(self.providers)} (add another "
                   "endpoint of a known wire with Registry.with_provider, and pass that "
                   "registry to TurnEngine(registry=...))")
            raise ConfigurationError(msg) from None

    def model(self, provider: str, name: str) -> ModelInfo:
        """The model's info; an unknown model follows ``unknown_models``.

        Raises:
            InvalidInput: the model is unknown and the policy is ``strict``
                (``field`` is ``model``).
        """
        found = self._lookup(provider, name)
        if found.known:
            return found
        if self.unknown_models is UnknownModelPolicy.STRICT:
            problem = (f"{provider} model {name!r} is not in the registry (strict policy); "
                       "add it with Registry.with_model")
            field = "model"
            raise InvalidInput(field, problem)
        _warn_unknown(provider, name)
        return found

    def _lookup(self, provider: str, name: str) -> ModelInfo:
        """The known model; a dated or versioned name (``deepseek-v4-flash-0701``,
        ``claude-sonnet-4-5-20250929``: a known name, a dash, then a digit) gets its known
        model's rules under its own name; else a made-up one with conservative limits,
        its provider's default reasoning rules (``UNKNOWN_MODEL_REPLAY``) and ``known``
        False."""
        found = self.models.get((provider, name))
        if found is not None:
            return found
        base = max((info for (owner, known), info in self.models.items()
                    if owner == provider and is_snapshot_of(name, known)),
                   key=lambda info: len(info.name), default=None)
        if base is not None:  # a dated name: the model's price, unless billed apart
            price = None if (provider, name) in SNAPSHOTS_BILLED_APART else base.price
            return attrs.evolve(base, name=name, price=price)
        return ModelInfo(provider=provider, name=name, context_limit=self.default_context_limit,
                         min_cache_tokens=_min_cache_default(provider), known=False,
                         **UNKNOWN_MODEL_LIMITS,
                         reasoning_replay=UNKNOWN_MODEL_REPLAY.get(provider,
                                                                   ReasoningReplay.NONE))

    def with_provider(self, name: str, *, mode: Mode | str = Mode.STATELESS_LOOP,
                      retention: timedelta | None = None,
                      settings: frozenset[str] | None = None) -> Registry:
        """A registry that knows provider ``name`` (replacing one of the same name).

        ``settings`` defaults to what the registry's provider of that name takes, else
        to none (every ``GenerationSettings`` field is then refused).
        """
        known = self.providers.get(name)
        taken = settings if settings is not None else known.settings if known else frozenset()
        added = ProviderCapability(name=name, mode=mode, retention=retention,
                                   settings=frozenset(taken))
        return attrs.evolve(self, providers={**self.providers, name: added})

    def with_unknown_models(self, policy: UnknownModelPolicy | str) -> Registry:
        """A registry whose unknown models follow ``policy`` (``strict`` / ``lenient``)."""
        return attrs.evolve(self, unknown_models=policy)

    def with_retention(self, provider: str, retention: timedelta | None) -> Registry:
        """A registry where ``provider``'s cursors live for ``retention``."""
        updated = attrs.evolve(self.provider(provider), retention=retention)
        return attrs.evolve(self, providers={**self.providers, provider: updated})

    def with_model(self, info: ModelInfo) -> Registry:
        """A registry that knows ``info`` (replacing an entry of the same name).

        Raises:
            ConfigurationError: ``info`` is not a usable ``ModelInfo`` (``model_problem``).
        """
        problem = model_problem(info)
        if problem is not None:
            raise ConfigurationError(problem)
        return attrs.evolve(self, models={**self.models, (info.provider, info.name): info})

    def with_price(self, provider: str, name: str, price: ModelPrice | None) -> Registry:
        """A registry where the model bills at ``price`` (None: unpriced).

        Unknown models are added with the default context limit, so an embedder can
        price a model the registry does not list.
        """
        return self.with_model(attrs.evolve(self._lookup(provider, name), price=price,
                                            known=True))

    def with_default_context_limit(self, limit: int) -> Registry:
        """A registry whose unknown models get ``limit`` tokens of context.

        Raises:
            ConfigurationError: ``limit`` is not a whole number from 1.
        """
        return attrs.evolve(self, default_context_limit=limit)


@functools.cache
def _warn_unknown(provider: str, name: str) -> None:
    """Once per process and model: a model the registry does not know is in use."""
    logger.warning("[registry][unknown-model] %s model %r is not in the registry: using "
                   "conservative limits (text only, %d output tokens, no reasoning "
                   "settings); add it with Registry.with_model", provider, name,
                   UNKNOWN_MODEL_LIMITS["max_output_tokens"])


def _p(name: str, mode: Mode, retention: timedelta | None = None) -> ProviderCapability:
    return ProviderCapability(name=name, mode=mode, retention=retention,
                              settings=PROVIDER_SETTINGS.get(name, frozenset()),
                              min_output_tokens=MIN_OUTPUT_TOKENS.get(name, 1))


_PROVIDERS = (
    _p("openai", Mode.RESPONSES, timedelta(days=30)),
    # Retention of stored interactions is not documented in the wire reference; 55 days
    # is the paid-tier figure. A cursor that dies earlier is caught by the provider's own
    # error and costs one replay (docs/decisions.md, 2026-12-02).
    _p("gemini", Mode.INTERACTIONS, timedelta(days=55)),
    _p("openai-compatible", Mode.STATELESS_LOOP),
    _p("anthropic", Mode.STATELESS_LOOP),
    _p("deepseek", Mode.STATELESS_LOOP),
)


def _min_cache_default(provider: str) -> int:
    """An Anthropic model the minimums table leaves out: the smallest documented one."""
    return DEFAULT_ANTHROPIC_MIN_CACHE_TOKENS if provider == "anthropic" else 0


def _m(provider: str, name: str, limit: int, **kw: object) -> ModelInfo:
    info = ModelInfo(provider=provider, name=name, context_limit=limit, **kw)  # type: ignore[arg-type]
    return attrs.evolve(info, price=PRICES.get((provider, name)),
                        min_cache_tokens=MIN_CACHE_TOKENS.get((provider, name),
                                                              _min_cache_default(provider)),
                        **capabilities(provider, name))


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
    # Claude Opus 4.5 and later (the 4.6 models here) keep earlier turns' thinking blocks
    # in context (docs/decisions.md, wire5): ReasoningReplay.ALL.
    _m("anthropic", "claude-sonnet-4-6", 200_000, thinking=True, compaction=True,
       reasoning_replay=ReasoningReplay.ALL),
    _m("anthropic", "claude-opus-4-6", 200_000, thinking=True, compaction=True,
       reasoning_replay=ReasoningReplay.ALL),
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
    # The name DeepSeek's pricing page says to use (DeepSeek-V4.1-Flash; money9).
    _m("deepseek", "deepseek-flash", 1_000_000, thinking=True,
       reasoning_replay=ReasoningReplay.TOOL_TURNS),
)

DEFAULT_REGISTRY = Registry(
    providers={p.name: p for p in _PROVIDERS},
    models={(m.provider, m.name): m for m in _MODELS},
)
