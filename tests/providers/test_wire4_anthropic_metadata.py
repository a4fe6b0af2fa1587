"""Anthropic takes ``metadata.user_id`` (the Messages API's one metadata key): the
registry accepts exactly that key, bounded, and the request carries it (wire4)."""

from __future__ import annotations

import pytest

from tests.providers.support import request_json
from turnstate.core._decisions import Strategy
from turnstate.core._errors import InvalidInput
from turnstate.core._generation import GenerationSettings, check_settings
from turnstate.core._registry import DEFAULT_REGISTRY
from turnstate.providers import AnthropicAdapter, ProviderCall

MODEL = DEFAULT_REGISTRY.model("anthropic", "claude-sonnet-4-5")
PROVIDER = DEFAULT_REGISTRY.provider("anthropic")


def check(metadata: dict[str, str]) -> None:
    check_settings(GenerationSettings(metadata=metadata), PROVIDER, MODEL, ())


def test_metadata_user_id_is_taken_and_sent() -> None:
    settings = GenerationSettings(metadata={"user_id": "u-7f3a"})
    check_settings(settings, PROVIDER, MODEL, ())
    body = request_json(AnthropicAdapter(), ProviderCall(
        strategy=Strategy.LOCAL_LOOP, model=MODEL, system_prompt="", tools=(),
        user_text="hi", generation=settings))
    assert body["metadata"] == {"user_id": "u-7f3a"}


@pytest.mark.parametrize("metadata", [{"user_id": "u", "team": "x"}, {"session": "s"},
                                      {"user_id": "u" * 257}])
def test_other_metadata_is_refused_typed(metadata: dict[str, str]) -> None:
    with pytest.raises(InvalidInput) as raised:
        check(metadata)
    assert raised.value.field == "settings.metadata"


def test_other_providers_keep_their_metadata_rules() -> None:
    check_settings(GenerationSettings(metadata={"team": "x"}),
                   DEFAULT_REGISTRY.provider("openai"), DEFAULT_REGISTRY.model("openai", "gpt-4o"),
                   ())
    with pytest.raises(InvalidInput):
        check_settings(GenerationSettings(metadata={"user_id": "u"}),
                       DEFAULT_REGISTRY.provider("gemini"),
                       DEFAULT_REGISTRY.model("gemini", "gemini-2.5-flash"), ())
