"""GenerationSettings are checked against the provider and the model before a turn starts,
and the registry derives providers and models and follows an unknown-model policy."""

from __future__ import annotations

import logging

import pytest

from turnstate.core._envelope import Mode
from turnstate.core._errors import InvalidInput
from turnstate.core._generation import GenerationSettings, ReasoningEffort, check_settings
from turnstate.core._registry import DEFAULT_REGISTRY, ModelInfo, UnknownModelPolicy


def check(provider: str, model: str, settings: GenerationSettings,
          tools: tuple[str, ...] = ("weather",)) -> None:
    check_settings(settings, DEFAULT_REGISTRY.provider(provider),
                   DEFAULT_REGISTRY.model(provider, model), tools)


def refused(provider: str, model: str, settings: GenerationSettings) -> InvalidInput:
    with pytest.raises(InvalidInput) as caught:
        check(provider, model, settings)
    return caught.value


def test_every_setting_a_provider_takes_passes_on_a_model_that_takes_it() -> None:
    check("openai", "gpt-5", GenerationSettings(
        max_output_tokens=2_000, reasoning_effort="minimal", tool_choice="weather",
        parallel_tool_calls=False, metadata={"team": "a"}))
    check("openai", "gpt-4o", GenerationSettings(temperature=1.5, top_p=0.9))
    check("anthropic", "claude-sonnet-4-5", GenerationSettings(
        max_output_tokens=8_000, top_p=0.95, reasoning_budget_tokens=4_000,
        tool_choice="auto", stop=("END",), parallel_tool_calls=False))
    check("anthropic", "claude-sonnet-4-5", GenerationSettings(
        temperature=0.5, tool_choice="required"))  # without thinking, both are fine
    check("anthropic", "claude-3-5-haiku", GenerationSettings(temperature=0.5, top_p=0.9))
    check("gemini", "gemini-3-pro-preview", GenerationSettings(
        max_output_tokens=100, temperature=0.2, reasoning_effort="high", stop="x", seed=7,
        tool_choice="none"))
    check("deepseek", "deepseek-reasoner", GenerationSettings(reasoning_effort="low",
                                                               stop=("a", "b")))
    check("openai-compatible", "gpt-4o", GenerationSettings(seed=1, stop=("a",)))


@pytest.mark.parametrize(("provider", "model", "settings", "field"), [
    ("openai", "o3", GenerationSettings(temperature=0.2), "settings.temperature"),
    ("openai", "gpt-5", GenerationSettings(top_p=0.5), "settings.top_p"),
    ("openai", "gpt-4o", GenerationSettings(max_output_tokens=16_385),
     "settings.max_output_tokens"),
    ("openai", "gpt-4o", GenerationSettings(max_output_tokens=0), "settings.max_output_tokens"),
    ("openai", "gpt-4o", GenerationSettings(reasoning_effort="low"),
     "settings.reasoning_effort"),
    ("openai", "o3", GenerationSettings(reasoning_effort="minimal"),
     "settings.reasoning_effort"),
    ("openai", "gpt-4o", GenerationSettings(stop=("x",)), "settings.stop"),
    ("openai", "gpt-4o", GenerationSettings(seed=3), "settings.seed"),
    ("anthropic", "claude-sonnet-4-5", GenerationSettings(temperature=1.5),
     "settings.temperature"),
    ("anthropic", "claude-sonnet-4-5",
     GenerationSettings(max_output_tokens=2_000, reasoning_budget_tokens=4_000),
     "settings.reasoning_budget_tokens"),
    ("anthropic", "claude-sonnet-4-5", GenerationSettings(reasoning_budget_tokens=500),
     "settings.reasoning_budget_tokens"),
    ("anthropic", "claude-3-5-haiku", GenerationSettings(reasoning_budget_tokens=2_000),
     "settings.reasoning_budget_tokens"),
    ("anthropic", "claude-sonnet-4-5", GenerationSettings(reasoning_effort="high"),
     "settings.reasoning_effort"),
    ("anthropic", "claude-sonnet-4-5", GenerationSettings(metadata={"a": "b"}),
     "settings.metadata"),
    ("anthropic", "claude-sonnet-4-5", GenerationSettings(temperature=0.5, top_p=0.9),
     "settings.top_p"),
    ("anthropic", "claude-opus-4-1-20250805", GenerationSettings(temperature=1, top_p=1),
     "settings.top_p"),
    ("anthropic", "claude-sonnet-4-5",
     GenerationSettings(reasoning_budget_tokens=2_000, temperature=0.5),
     "settings.temperature"),
    ("anthropic", "claude-opus-4-6",
     GenerationSettings(reasoning_budget_tokens=2_000, temperature=0),
     "settings.temperature"),
    ("anthropic", "claude-sonnet-4-5",
     GenerationSettings(reasoning_budget_tokens=2_000, top_p=0.9), "settings.top_p"),
    ("anthropic", "claude-sonnet-4-5",
     GenerationSettings(reasoning_budget_tokens=2_000, tool_choice="required"),
     "settings.tool_choice"),
    ("anthropic", "claude-haiku-4-5",
     GenerationSettings(reasoning_budget_tokens=2_000, tool_choice="weather"),
     "settings.tool_choice"),
    ("gemini", "gemini-2.5-flash", GenerationSettings(tool_choice="search"),
     "settings.tool_choice"),
    ("gemini", "gemini-2.5-flash", GenerationSettings(stop=("a", "b", "c", "d", "e")),
     "settings.stop"),
    ("gemini", "gemini-2.5-flash", GenerationSettings(stop=("",)), "settings.stop"),
    ("gemini", "gemini-2.5-flash", GenerationSettings(parallel_tool_calls=True),
     "settings.parallel_tool_calls"),
    ("openai", "gpt-4o", GenerationSettings(metadata={str(n): "v" for n in range(17)}),
     "settings.metadata"),
    ("deepseek", "deepseek-chat", GenerationSettings(temperature=True),  # type: ignore[arg-type]
     "settings.temperature"),
])
def test_a_setting_the_provider_or_model_rejects_names_its_field(
    provider: str, model: str, settings: GenerationSettings, field: str,
) -> None:
    assert refused(provider, model, settings).field == field


def test_an_unknown_effort_is_invalid_input_when_the_settings_are_built() -> None:
    with pytest.raises(InvalidInput) as caught:
        GenerationSettings(reasoning_effort="extreme")
    assert caught.value.field == "settings.reasoning_effort"
    assert GenerationSettings(reasoning_effort="low").reasoning_effort is ReasoningEffort.LOW


def test_settings_are_frozen_and_report_what_they_set() -> None:
    settings = GenerationSettings(max_output_tokens=5, stop="x", metadata={"k": "v"})
    assert settings.given() == ("max_output_tokens", "stop", "metadata")
    assert settings.as_json() == {"max_output_tokens": 5, "stop": ["x"], "metadata": {"k": "v"}}
    assert GenerationSettings().given() == ()
    with pytest.raises(TypeError):
        settings.metadata["k"] = "w"  # type: ignore[index]


def test_strict_refuses_an_unknown_model_naming_it() -> None:
    strict = DEFAULT_REGISTRY.with_unknown_models("strict")
    with pytest.raises(InvalidInput) as caught:
        strict.model("openai", "gpt-99")
    assert caught.value.field == "model" and "gpt-99" in str(caught.value)
    assert strict.model("openai", "gpt-4o").known


def test_lenient_warns_once_per_model_with_conservative_limits(
    caplog: pytest.LogCaptureFixture,
) -> None:
    assert DEFAULT_REGISTRY.unknown_models is UnknownModelPolicy.LENIENT
    with caplog.at_level(logging.WARNING, logger="turnstate"):
        first = DEFAULT_REGISTRY.model("anthropic", "claude-lenient-test-a")
        DEFAULT_REGISTRY.model("anthropic", "claude-lenient-test-a")
        DEFAULT_REGISTRY.model("anthropic", "claude-lenient-test-b")
    warnings = [r.getMessage() for r in caplog.records if "unknown-model" in r.getMessage()]
    assert len(warnings) == 2 and "claude-lenient-test-a" in warnings[0]
    assert not first.known and first.max_output_tokens == 4_096
    assert first.inputs == frozenset() and first.reasoning_efforts == frozenset()
    assert first.min_thinking_budget == 0


def test_with_model_and_with_provider_return_new_registries() -> None:
    info = ModelInfo(provider="acme", name="acme-1", context_limit=50_000,
                     max_output_tokens=1_000, inputs=frozenset({"image"}))
    derived = DEFAULT_REGISTRY.with_provider("acme", mode="stateless-loop",
                                             settings=frozenset({"temperature"}))
    derived = derived.with_model(info)
    assert derived.model("acme", "acme-1") == info
    assert derived.provider("acme").mode is Mode.STATELESS_LOOP
    assert "acme" not in DEFAULT_REGISTRY.providers
    check_settings(GenerationSettings(temperature=0.3), derived.provider("acme"), info, ())
    with pytest.raises(InvalidInput):
        check_settings(GenerationSettings(seed=1), derived.provider("acme"), info, ())
    durable = DEFAULT_REGISTRY.with_provider("openai", mode=Mode.RESPONSES)
    assert durable.provider("openai").settings == DEFAULT_REGISTRY.provider("openai").settings


def test_every_provider_of_the_default_registry_takes_max_output_tokens() -> None:
    for capability in DEFAULT_REGISTRY.providers.values():
        assert "max_output_tokens" in capability.settings
        assert "tool_choice" in capability.settings


@pytest.mark.parametrize(("provider", "name", "family"), [
    ("anthropic", "claude-sonnet-4-5-20250929", "claude-sonnet-4-5"),
    ("openai", "gpt-4o-2024-08-06", "gpt-4o"),
    ("openai", "gpt-4.1-nano-2025-04-14", "gpt-4.1-nano"),
])
def test_dated_snapshots_match_their_family_even_under_strict(
    provider: str, name: str, family: str, caplog: pytest.LogCaptureFixture,
) -> None:
    strict = DEFAULT_REGISTRY.with_unknown_models(UnknownModelPolicy.STRICT)
    with caplog.at_level(logging.WARNING, logger="turnstate"):
        info = strict.model(provider, name)
    known = DEFAULT_REGISTRY.model(provider, family)
    assert info.known and info.name == name
    assert (info.context_limit, info.max_output_tokens, info.inputs, info.price) == (
        known.context_limit, known.max_output_tokens, known.inputs, known.price)
    assert not [r for r in caplog.records if "unknown-model" in r.getMessage()]
    with pytest.raises(InvalidInput):
        strict.model(provider, family + "x")  # a different model, not a snapshot


def test_deepseek_v4_takes_its_documented_384k_output_limit() -> None:
    """DeepSeek's Models & Pricing page: V4 (and its deepseek-chat / -reasoner aliases)
    answer up to 384K tokens (docs/decisions.md, the capability table)."""
    for model in ("deepseek-chat", "deepseek-reasoner", "deepseek-v4-flash", "deepseek-v4-pro"):
        check("deepseek", model, GenerationSettings(max_output_tokens=384_000))
        assert refused("deepseek", model, GenerationSettings(
            max_output_tokens=384_001)).field == "settings.max_output_tokens"


def test_an_adapter_that_thinks_by_default_holds_the_turn_to_the_thinking_rules() -> None:
    """A budget on the adapter, not in the settings, still turns thinking on."""
    settings = GenerationSettings(temperature=0.5)
    check("anthropic", "claude-sonnet-4-5", settings)
    with pytest.raises(InvalidInput) as caught:
        check_settings(settings, DEFAULT_REGISTRY.provider("anthropic"),
                       DEFAULT_REGISTRY.model("anthropic", "claude-sonnet-4-5"), (),
                       thinking_by_default=True)
    assert caught.value.field == "settings.temperature"
