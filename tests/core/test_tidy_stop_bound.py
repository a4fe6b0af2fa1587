"""Each stop sequence is bounded in length, on every provider that takes ``stop``.

The count was already bounded (four, OpenAI's documented limit, the strictest), but a
100,000-character sequence passed ``check_settings`` for Anthropic and DeepSeek and went
into the request body; it is now ``InvalidInput`` naming ``settings.stop`` before the lease.
"""

from __future__ import annotations

import pytest

from tests.core.test_settings import check, refused
from turnstate.core._generation import MAX_STOP_CHARS, GenerationSettings

TAKERS = [("anthropic", "claude-sonnet-4-5"), ("deepseek", "deepseek-chat"),
          ("gemini", "gemini-2.5-flash"), ("openai-compatible", "gpt-4o")]


@pytest.mark.parametrize(("provider", "model"), TAKERS)
def test_a_stop_sequence_over_the_bound_is_refused(provider: str, model: str) -> None:
    check(provider, model, GenerationSettings(stop=("a" * MAX_STOP_CHARS, "END")))
    for stop in ("x" * 100_000, ("ok", "y" * (MAX_STOP_CHARS + 1))):
        caught = refused(provider, model, GenerationSettings(stop=stop))
        assert caught.field == "settings.stop" and str(MAX_STOP_CHARS) in caught.problem
