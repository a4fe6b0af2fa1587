"""``ReasoningEffort.NONE``: gpt-5.1's default effort (no reasoning), which OpenAI's
``reasoning.effort`` reference lists for gpt-5.1 alone ("All models before gpt-5.1 ...
do not support none").

``GenerationSettings(reasoning_effort="none")`` was ``InvalidInput`` (not an effort), so
an embedder could not ask gpt-5.1 for its own default explicitly. It now goes to gpt-5.1
as ``reasoning.effort: "none"``; every other model refuses it naming the setting.
"""

from __future__ import annotations

import pytest

from tests.core.test_settings import check, refused
from turnstate.core._generation import GenerationSettings, ReasoningEffort
from turnstate.providers._settings import responses_fields

NONE = GenerationSettings(reasoning_effort="none")


def test_gpt_5_1_takes_none_and_sends_it_as_its_effort() -> None:
    assert NONE.reasoning_effort is ReasoningEffort.NONE
    check("openai", "gpt-5.1", NONE)
    body = responses_fields(NONE, has_tools=False, reasoning={"summary": "auto"})
    assert body["reasoning"] == {"summary": "auto", "effort": "none"}


@pytest.mark.parametrize(("provider", "model"), [
    ("openai", "gpt-5"), ("openai", "o3"), ("gemini", "gemini-3-pro-preview"),
    ("deepseek", "deepseek-reasoner"), ("openai-compatible", "grok-3-mini"),
    ("anthropic", "claude-sonnet-4-5"),
])
def test_every_other_model_refuses_none(provider: str, model: str) -> None:
    assert refused(provider, model, NONE).field == "settings.reasoning_effort"
