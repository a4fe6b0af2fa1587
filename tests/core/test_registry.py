"""The provider and model registry: what turnstate knows, as frozen data."""

from __future__ import annotations

from datetime import timedelta

import attrs
import pytest

from turnstate.core import (
    DEFAULT_REGISTRY,
    ConfigurationError,
    Mode,
    ModelInfo,
    ProviderCapability,
    ReasoningReplay,
    Registry,
)
from turnstate.core._capabilities import UNKNOWN_MODEL_LIMITS


@pytest.mark.parametrize(("name", "mode"), [("openai", Mode.RESPONSES),
                                            ("gemini", Mode.INTERACTIONS)])
def test_durable_providers(name: str, mode: Mode) -> None:
    """OpenAI continues by Responses cursors and Gemini by Interactions cursors."""
    capability = DEFAULT_REGISTRY.provider(name)
    assert (capability.name, capability.mode, capability.durable) == (name, mode, True)
    assert capability.retention is not None and capability.retention > timedelta(0)


@pytest.mark.parametrize("name", ["openai-compatible", "anthropic", "deepseek"])
def test_stateless_providers(name: str) -> None:
    """The Chat Completions family and Anthropic keep no cursor: a local loop, no retention."""
    capability = DEFAULT_REGISTRY.provider(name)
    assert capability.mode is Mode.STATELESS_LOOP
    assert capability.durable is False
    assert capability.retention is None


def test_exactly_five_providers_are_known() -> None:
    """The default registry knows the five providers of DESIGN.md section 7."""
    assert set(DEFAULT_REGISTRY.providers) == {"openai", "gemini", "openai-compatible",
                                               "anthropic", "deepseek"}


def test_openai_retention_is_thirty_days() -> None:
    """OpenAI keeps stored responses for 30 days."""
    assert DEFAULT_REGISTRY.provider("openai").retention == timedelta(days=30)


@pytest.mark.parametrize("name", ["", "OpenAI", "mystery", "openai "])
def test_unknown_provider_is_a_configuration_error(name: str) -> None:
    """Asking for a provider the registry does not know raises ConfigurationError."""
    with pytest.raises(ConfigurationError, match="unknown provider") as caught:
        DEFAULT_REGISTRY.provider(name)
    assert isinstance(caught.value, ValueError)
    with pytest.raises(ConfigurationError):
        DEFAULT_REGISTRY.with_retention(name, timedelta(days=1))


def test_with_retention_returns_a_new_registry() -> None:
    """``with_retention`` changes one provider in a copy; the default stays as it was."""
    before = DEFAULT_REGISTRY.provider("openai")
    derived = DEFAULT_REGISTRY.with_retention("openai", timedelta(hours=6))
    assert derived is not DEFAULT_REGISTRY
    assert derived.provider("openai").retention == timedelta(hours=6)
    assert derived.provider("openai").mode is Mode.RESPONSES
    assert derived.provider("gemini") == DEFAULT_REGISTRY.provider("gemini")
    assert DEFAULT_REGISTRY.provider("openai") == before
    assert DEFAULT_REGISTRY.provider("openai").retention == timedelta(days=30)
    never = DEFAULT_REGISTRY.with_retention("gemini", None)
    assert never.provider("gemini").retention is None
    assert DEFAULT_REGISTRY.provider("gemini").retention is not None


def test_with_model_returns_a_new_registry() -> None:
    """``with_model`` adds or replaces a model in a copy only."""
    info = ModelInfo(provider="openai", name="gpt-4o", context_limit=64_000)
    derived = DEFAULT_REGISTRY.with_model(info)
    assert derived.model("openai", "gpt-4o") == info
    assert DEFAULT_REGISTRY.model("openai", "gpt-4o").context_limit == 128_000
    added = DEFAULT_REGISTRY.with_model(ModelInfo(provider="anthropic", name="new",
                                                  context_limit=500_000))
    assert added.model("anthropic", "new").context_limit == 500_000
    assert ("anthropic", "new") not in DEFAULT_REGISTRY.models


def test_with_default_context_limit_returns_a_new_registry() -> None:
    """The default for unknown models changes in a copy; non-positive limits are refused."""
    derived = DEFAULT_REGISTRY.with_default_context_limit(32_000)
    assert derived.model("openai", "unknown").context_limit == 32_000
    assert DEFAULT_REGISTRY.model("openai", "unknown").context_limit == 128_000
    for bad in (0, -1):
        with pytest.raises(ConfigurationError):
            DEFAULT_REGISTRY.with_default_context_limit(bad)


def test_unknown_model_is_described_with_the_default_limit() -> None:
    """An unknown model gets a ModelInfo with the default limit and its provider's
    default reasoning rules: none, except DeepSeek's tool-turn replay."""
    info = DEFAULT_REGISTRY.model("openai", "gpt-future")
    assert info == ModelInfo(provider="openai", name="gpt-future",
                             context_limit=DEFAULT_REGISTRY.default_context_limit, known=False,
                             **UNKNOWN_MODEL_LIMITS)
    assert info.reasoning_replay is ReasoningReplay.NONE
    deepseek = DEFAULT_REGISTRY.model("deepseek", "deepseek-future")
    assert deepseek == ModelInfo(provider="deepseek", name="deepseek-future",
                                 context_limit=DEFAULT_REGISTRY.default_context_limit,
                                 reasoning_replay=ReasoningReplay.TOOL_TURNS, known=False,
                                 **UNKNOWN_MODEL_LIMITS)


@pytest.mark.parametrize(("name", "base"), [
    ("deepseek-reasoner-2026-01-01", "deepseek-reasoner"),
    ("deepseek-v4-flash-0701", "deepseek-v4-flash"),
    ("claude-sonnet-4-5-20250929", "claude-sonnet-4-5"),
])
def test_dated_names_get_their_models_rules(name: str, base: str) -> None:
    """A dated or versioned name gets the known model's rules under its own name
    (issue 24, item 1: thinking and reasoning replay were off for these)."""
    provider = "anthropic" if base.startswith("claude") else "deepseek"
    info = DEFAULT_REGISTRY.model(provider, name)
    known = DEFAULT_REGISTRY.model(provider, base)
    assert info == attrs.evolve(known, name=name)
    assert info.thinking



def test_models_of_all_five_providers_are_known() -> None:
    """Every provider has at least one well-known model with a positive context limit."""
    providers = {provider for provider, _ in DEFAULT_REGISTRY.models}
    assert providers == set(DEFAULT_REGISTRY.providers)
    assert all(m.context_limit > 0 for m in DEFAULT_REGISTRY.models.values())
    assert all(key == (m.provider, m.name) for key, m in DEFAULT_REGISTRY.models.items())


def test_deepseek_reasoning_rules_are_per_model() -> None:
    """The registry says which DeepSeek models need reasoning replayed, and where: the
    old names are aliases of deepseek-v4-flash (thinking off and on), so V4's rules."""
    assert DEFAULT_REGISTRY.model("deepseek", "deepseek-chat").reasoning_replay is \
        ReasoningReplay.NONE
    assert DEFAULT_REGISTRY.model("deepseek", "deepseek-reasoner").reasoning_replay is \
        ReasoningReplay.TOOL_TURNS
    assert DEFAULT_REGISTRY.model("deepseek", "deepseek-v4-pro").reasoning_replay is \
        ReasoningReplay.TOOL_TURNS


def test_registry_values_are_immutable() -> None:
    """Registries, capabilities, model infos and their mappings cannot be changed in place."""
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        DEFAULT_REGISTRY.default_context_limit = 1  # type: ignore[misc]
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        DEFAULT_REGISTRY.provider("openai").retention = None  # type: ignore[misc]
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        DEFAULT_REGISTRY.model("openai", "gpt-4o").context_limit = 1  # type: ignore[misc]
    with pytest.raises(TypeError):
        DEFAULT_REGISTRY.providers["openai"] = ProviderCapability(  # type: ignore[index]
            name="openai", mode=Mode.STATELESS_LOOP)
    with pytest.raises(TypeError):
        del DEFAULT_REGISTRY.models[("openai", "gpt-4o")]  # type: ignore[attr-defined]


def test_registry_copies_the_mappings_it_is_given() -> None:
    """Changing the dict a registry was built from does not change the registry."""
    providers = {"openai": DEFAULT_REGISTRY.provider("openai")}
    registry = Registry(providers=providers, models={})
    providers["gemini"] = DEFAULT_REGISTRY.provider("gemini")
    with pytest.raises(ConfigurationError):
        registry.provider("gemini")
