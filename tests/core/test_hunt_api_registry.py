"""A registry entry that cannot serve a turn is a ``ConfigurationError`` when the registry
is made, naming the model and the field (hunt-api).

``Registry.with_price("openai", "gpt-4o", {"input": 1})`` was taken, and every turn of the
model then called the provider, was billed and aborted ``internal_error``
(``AttributeError: 'dict' object has no attribute 'input'``); a ``ModelInfo`` with a
``context_limit`` of ``"100000"`` aborted every turn ``internal_error``, one of 0 or -1
refused every turn as a context overflow, and ``with_default_context_limit(True)`` made
unknown models ask OpenAI to compact at 0 tokens (an HTTP 400 on every turn).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from turnstate import (
    DEFAULT_REGISTRY,
    ConfigurationError,
    ModelInfo,
    ModelPrice,
    ReasoningEffort,
    Registry,
)


def _info(**fields: Any) -> ModelInfo:
    return ModelInfo(provider="openai", name="m0", **{"context_limit": 100_000, **fields})


@pytest.mark.parametrize(("fields", "needle"), [
    ({"context_limit": 0}, "context_limit"),
    ({"context_limit": -1}, "context_limit"),
    ({"context_limit": "100000"}, "context_limit"),
    ({"context_limit": True}, "context_limit"),
    ({"max_output_tokens": 0}, "max_output_tokens"),
    ({"max_output_tokens": 1.5}, "max_output_tokens"),
    ({"min_cache_tokens": -1}, "min_cache_tokens"),
    ({"min_thinking_budget": None}, "min_thinking_budget"),
    ({"price": {"input": 1}}, "price"),
    ({"thinking": "no"}, "thinking"),
    ({"max_temperature": float("nan")}, "max_temperature"),
    ({"inputs": "image"}, "inputs"),
    ({"inputs": {"video"}}, "inputs"),
    ({"reasoning_efforts": {"max"}}, "reasoning_efforts"),
    ({"reasoning_replay": "always"}, "reasoning_replay"),
])
def test_a_model_that_cannot_serve_a_turn_is_refused_when_added(fields: dict[str, Any],
                                                                 needle: str) -> None:
    with pytest.raises(ConfigurationError, match=f"openai/m0: {needle}"):
        DEFAULT_REGISTRY.with_model(_info(**fields))
    with pytest.raises(ConfigurationError, match=needle):
        Registry(DEFAULT_REGISTRY.providers, {("openai", "m0"): _info(**fields)})


@pytest.mark.parametrize("price", [{"input": 1}, "1.0", 3])
def test_a_price_that_is_not_a_model_price_is_refused(price: object) -> None:
    with pytest.raises(ConfigurationError, match="price must be a ModelPrice or None"):
        DEFAULT_REGISTRY.with_price("openai", "gpt-4o", price)  # type: ignore[arg-type]


def test_something_that_is_not_a_model_info_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="must be a ModelInfo, got dict"):
        DEFAULT_REGISTRY.with_model({"provider": "openai"})  # type: ignore[arg-type]


@pytest.mark.parametrize("limit", [True, "5", 0, -3, 1.5])
def test_a_default_context_limit_that_is_not_a_count_is_refused(limit: object) -> None:
    with pytest.raises(ConfigurationError, match="default context limit"):
        DEFAULT_REGISTRY.with_default_context_limit(limit)  # type: ignore[arg-type]


def test_usable_entries_are_taken() -> None:
    price = ModelPrice(input="1", cached_input="0.1", output="2")
    registry = (DEFAULT_REGISTRY.with_model(_info(inputs={"image"}, reasoning_efforts={"low"}))
                .with_price("acme", "new", price).with_default_context_limit(1))
    assert registry.model("openai", "m0").inputs == {"image"}
    assert registry.model("acme", "new").price == price
    assert registry.default_context_limit == 1


@pytest.mark.parametrize(("make", "needle"), [
    (lambda: DEFAULT_REGISTRY.with_provider("acme", mode="durable"), "mode must be one of"),
    (lambda: DEFAULT_REGISTRY.with_retention("openai", timedelta(days=-1)), "retention"),
    (lambda: DEFAULT_REGISTRY.with_retention("openai", timedelta(0)), "retention"),
    (lambda: DEFAULT_REGISTRY.with_retention("openai", 30), "retention"),  # type: ignore[arg-type]
    (lambda: DEFAULT_REGISTRY.with_unknown_models("loose"), "unknown_models must be one of"),
])
def test_a_provider_setting_or_policy_out_of_range_is_refused(make: Any, needle: str) -> None:
    """A bad mode or policy raised enum's bare ``ValueError``; a retention of zero or
    less was taken and expired every stored cursor at once (every turn replayed)."""
    with pytest.raises(ConfigurationError, match=needle):
        make()


def test_provider_settings_in_range_are_taken() -> None:
    registry = (DEFAULT_REGISTRY.with_provider("acme", mode="responses",
                                               retention=timedelta(hours=1))
                .with_retention("openai", None).with_unknown_models("strict"))
    assert registry.provider("acme").retention == timedelta(hours=1)
    assert registry.provider("openai").retention is None


def test_the_registrys_efforts_are_the_settings_efforts() -> None:
    from turnstate.core._registry_checks import _EFFORTS

    assert {e.value for e in ReasoningEffort} == _EFFORTS
