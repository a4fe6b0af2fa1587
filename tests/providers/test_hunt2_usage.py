"""A negative token count in a provider's usage is not a count: it reads as 0.

Every parser took any JSON integer as a count, so a stream (a relay, a buggy gateway)
reporting ``"output_tokens": -7`` committed a turn with negative usage and a negative
cost (``TurnCost.output`` of -0.000003 USD for -5 tokens of gpt-4o-mini), which an
embedder summing costs per user would credit.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import attrs
import pytest

from tests.helpers import chunk_events
from turnstate.providers import (
    AnthropicAdapter,
    ChatCompletionsAdapter,
    DeepSeekAdapter,
    GeminiInteractionsAdapter,
    OpenAIResponsesAdapter,
    ProviderAdapter,
    SseEvent,
)

DATA = Path(__file__).resolve().parents[1] / "data"
STREAMS: dict[str, tuple[ProviderAdapter, str, str | None]] = {
    "openai": (OpenAIResponsesAdapter(base_url="http://127.0.0.1:1/v1", api_key="k"),
               "openai-responses/text", "type"),
    "gemini": (GeminiInteractionsAdapter(base_url="http://127.0.0.1:1", api_key="k"),
               "gemini-interactions/text", "event_type"),
    "anthropic": (AnthropicAdapter(base_url="http://127.0.0.1:1/v1", api_key="k"),
                  "anthropic/thinking-tool", "type"),
    "openai-compatible": (ChatCompletionsAdapter(base_url="http://127.0.0.1:1/v1", api_key="k"),
                          "chat-completions/parallel-tool-calls", None),
    "deepseek": (DeepSeekAdapter(base_url="http://127.0.0.1:1", api_key="k"),
                 "deepseek/tool-call-reasoning", None),
}


def negated(value: Any, inside_usage: bool = False) -> Any:
    """``value`` with every integer under a ``usage`` object made negative."""
    if isinstance(value, dict):
        return {k: negated(v, inside_usage or k == "usage") for k, v in value.items()}
    if isinstance(value, list):
        return [negated(v, inside_usage) for v in value]
    if inside_usage and isinstance(value, int) and not isinstance(value, bool):
        return -7 - value
    return value


def usage_of(adapter: ProviderAdapter, events: list[SseEvent]) -> dict[str, Any]:
    parser = adapter.stream_parser()
    for event in events:
        parser.feed(event)
    return attrs.asdict(parser.finish().usage)


@pytest.mark.parametrize("provider", sorted(STREAMS))
def test_negative_usage_counts_read_as_zero(provider: str) -> None:
    adapter, name, key = STREAMS[provider]
    events = chunk_events(DATA / f"{name}.chunks.txt", event_key=key)
    assert any(usage_of(adapter, events).values()), "the stream reports no usage to negate"
    hostile = [e if e.data.strip() == "[DONE]" else
               attrs.evolve(e, data=json.dumps(negated(json.loads(e.data)))) for e in events]
    counts = usage_of(adapter, hostile)
    assert all(count is None or count == 0 for count in counts.values()), counts
