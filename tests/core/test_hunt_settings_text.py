"""Stop sequences and metadata that UTF-8 cannot encode are refused before the lease.

A lone surrogate in ``stop`` or ``metadata`` passed ``check_settings``; the adapter then
failed to build the request mid-turn (``turn_aborted``, ``provider_failed``) instead of
the ``InvalidInput`` naming the setting that every other bad setting gets.
"""

from __future__ import annotations

import pytest

from tests.core.test_settings import refused
from turnstate.core._generation import GenerationSettings


@pytest.mark.parametrize(("provider", "model", "settings", "field"), [
    ("deepseek", "deepseek-chat", GenerationSettings(stop=("ok", "\ud800")), "settings.stop"),
    ("anthropic", "claude-sonnet-4-5", GenerationSettings(stop="\udfff"), "settings.stop"),
    ("openai", "gpt-5", GenerationSettings(metadata={"team": "a\ud83d"}),
     "settings.metadata"),
    ("openai", "gpt-5", GenerationSettings(metadata={"\ud83d": "a"}), "settings.metadata"),
])
def test_text_without_a_utf8_form_is_refused_naming_the_setting(
        provider: str, model: str, settings: GenerationSettings, field: str) -> None:
    assert refused(provider, model, settings).field == field
