"""A refused setting says what to do instead (embed7).

An embedder with one "reasoning" control per user: ``reasoning_effort`` on Anthropic was
refused with "anthropic does not take reasoning_effort", and a thinking budget on OpenAI
with "openai does not take reasoning_budget_tokens", neither naming the field that
provider does take. A model the registry does not know (a new release, taken under the
default ``lenient`` policy with conservative limits) was refused as if the model itself
could not: "gpt-5.2 takes no effort 'low' (it takes: no effort at all)", "must be an
integer from 16 to 4,096 for gpt-5.2", "does not take image input", never saying the
limits are the registry's guess for an unknown model and that ``Registry.with_model``
declares it.
"""

from __future__ import annotations

import pytest

from turnstate import (
    DEFAULT_REGISTRY,
    ConfigurationError,
    GenerationSettings,
    ImagePart,
    InvalidInput,
    TextPart,
    TurnInput,
)
from turnstate.engine._limits import DEFAULT_TURN_LIMITS, check_turn

PNG = b"\x89PNG\r\n\x1a\n" + bytes(16)


def refusal(provider: str, model: str, settings: GenerationSettings | None = None,
            image: bool = False) -> InvalidInput:
    content = (TextPart(text="hi"),) + ((ImagePart(media_type="image/png", data=PNG),)
                                        if image else ())
    turn = TurnInput(provider=provider, model=model, system_prompt="", content=content,
                     settings=settings or GenerationSettings())
    with pytest.raises(InvalidInput) as caught:
        check_turn(turn, DEFAULT_TURN_LIMITS, DEFAULT_REGISTRY, lambda _: object())
    return caught.value


def test_an_effort_on_anthropic_points_at_the_thinking_budget() -> None:
    error = refusal("anthropic", "claude-sonnet-4-5", GenerationSettings(reasoning_effort="high"))
    assert error.field == "settings.reasoning_effort"
    assert "reasoning_budget_tokens" in error.problem


def test_a_budget_on_openai_points_at_the_effort() -> None:
    error = refusal("openai", "gpt-5", GenerationSettings(reasoning_budget_tokens=2_000))
    assert error.field == "settings.reasoning_budget_tokens"
    assert "reasoning_effort" in error.problem


@pytest.mark.parametrize(("settings", "image", "field"), [
    (GenerationSettings(reasoning_effort="low"), False, "settings.reasoning_effort"),
    (GenerationSettings(max_output_tokens=8_000), False, "settings.max_output_tokens"),
    (None, True, "content[1]"),
])
def test_an_unknown_models_refusal_says_the_limits_are_the_registrys_guess(
        settings: GenerationSettings | None, image: bool, field: str) -> None:
    error = refusal("openai", "gpt-5.2", settings, image)
    assert error.field == field
    assert "not in the registry" in error.problem and "Registry.with_model" in error.problem


def test_a_known_models_refusal_has_no_registry_hint() -> None:
    error = refusal("openai", "gpt-4.1", GenerationSettings(reasoning_effort="low"))
    assert "Registry.with_model" not in error.problem


def test_an_unknown_provider_names_with_provider() -> None:
    """A second OpenAI-compatible endpoint under a name of its own ("mistral") was
    "unknown provider 'mistral'; known: [...]", not saying how to add it."""
    turn = TurnInput(provider="mistral", model="mistral-large", system_prompt="", user_text="x")
    with pytest.raises(ConfigurationError) as caught:
        check_turn(turn, DEFAULT_TURN_LIMITS, DEFAULT_REGISTRY, lambda _: object())
    assert "Registry.with_provider" in str(caught.value)


def test_an_added_providers_refused_setting_names_with_provider_settings() -> None:
    """Added with ``with_provider("mistral")``, it takes no setting: "mistral does not take
    temperature" said nothing of ``settings=``."""
    registry = DEFAULT_REGISTRY.with_provider("mistral")
    turn = TurnInput(provider="mistral", model="mistral-large", system_prompt="",
                     user_text="x", settings=GenerationSettings(temperature=0.2))
    with pytest.raises(InvalidInput) as caught:
        check_turn(turn, DEFAULT_TURN_LIMITS, registry, lambda _: object())
    assert caught.value.field == "settings.temperature"
    assert "with_provider" in caught.value.problem and "settings=" in caught.value.problem
    taken = registry.with_provider(
        "mistral", settings=DEFAULT_REGISTRY.provider("openai-compatible").settings)
    check_turn(turn, DEFAULT_TURN_LIMITS, taken, lambda _: object())  # the docs' way
