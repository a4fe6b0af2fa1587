"""Anthropic's ``message_delta`` usage: a null count keeps what ``message_start`` said.

``MessageDeltaUsage`` types ``input_tokens``, ``cache_creation_input_tokens`` and
``cache_read_input_tokens`` as nullable (ANT-PY ``types/message_delta_usage.py``; the
Ruby SDK's ``required ..., nil?: true``), and the SDK's accumulator overwrites a count
only when the delta's value is not None (ANT-PY ``lib/streaming/_messages.py``,
``accumulate_event``). The parser merged the delta's usage as it came, so a null wiped
the input and cache counts of ``message_start``: a turn read 6,000 cached tokens as 0
input, its cost priced none of them, and its context snapshot said the window was empty.
"""

from __future__ import annotations

from pathlib import Path

from tests.helpers import chunk_events
from turnstate.core._conversation import TextPart, Usage
from turnstate.core._cost import turn_cost
from turnstate.core._registry import DEFAULT_REGISTRY
from turnstate.providers.anthropic import AnthropicStreamParser

DATA = Path(__file__).resolve().parents[1] / "data" / "anthropic"


def test_null_counts_in_message_delta_keep_the_start_counts() -> None:
    parser = AnthropicStreamParser()
    for event in chunk_events(DATA / "usage-null-in-delta.chunks.txt"):
        parser.feed(event)
    assert parser.done
    response = parser.finish()
    assert response.parts == (TextPart(text="Cached answer."),)
    assert response.usage == Usage(input_tokens=210 + 1800 + 5200, output_tokens=42,
                                   cached_input_tokens=5200, cache_write_tokens=1800)
    price = DEFAULT_REGISTRY.model("anthropic", "claude-sonnet-4-5").price
    cost = turn_cost(response.usage, price)
    assert cost is not None and cost.cached_input > 0 and cost.cache_write > 0


def test_a_count_in_message_delta_still_wins() -> None:
    """Cumulative counts: a delta's number replaces the start's (the last value wins)."""
    events = chunk_events(DATA / "usage-null-in-delta.chunks.txt")
    last_delta = events[-2]
    data = last_delta.data.replace('"input_tokens":null', '"input_tokens":230')
    events[-2] = type(last_delta)(data=data, event=last_delta.event)
    parser = AnthropicStreamParser()
    for event in events:
        parser.feed(event)
    assert parser.finish().usage.input_tokens == 230 + 1800 + 5200
