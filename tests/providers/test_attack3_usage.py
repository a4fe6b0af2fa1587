"""A token count past any real request's is not a count: it reads as 0 (attack3).

Every parser took any positive JSON integer as a count, so a stream (a relay, a buggy
gateway) reporting ``"output_tokens": 10**30`` committed a turn with that usage and a
``TurnCost.output`` of 1.5e24 USD (Claude Sonnet), which an embedder summing costs per
user would bill. ``int_field`` reads a count past ``MAX_TOKEN_COUNT`` (10**9, a hundred
times the largest context window offered) as 0, as it reads a negative one.
"""

from __future__ import annotations

import json
from typing import Any

import attrs
import pytest

from tests.helpers import chunk_events
from tests.providers.test_hunt2_usage import DATA, STREAMS, usage_of
from turnstate.providers._frames import MAX_TOKEN_COUNT, int_field


def replaced(value: Any, count: int, inside_usage: bool = False) -> Any:
    """``value`` with every positive integer under a ``usage`` object made ``count``."""
    if isinstance(value, dict):
        return {k: replaced(v, count, inside_usage or k == "usage") for k, v in value.items()}
    if isinstance(value, list):
        return [replaced(v, count, inside_usage) for v in value]
    if inside_usage and isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return count
    return value


@pytest.mark.parametrize("count", [10**30, 2**63, MAX_TOKEN_COUNT + 1])
@pytest.mark.parametrize("provider", sorted(STREAMS))
def test_usage_counts_past_any_request_read_as_zero(provider: str, count: int) -> None:
    adapter, name, key = STREAMS[provider]
    events = chunk_events(DATA / f"{name}.chunks.txt", event_key=key)
    assert any(usage_of(adapter, events).values()), "the stream reports no usage to replace"
    hostile = [e if e.data.strip() == "[DONE]" else
               attrs.evolve(e, data=json.dumps(replaced(json.loads(e.data), count)))
               for e in events]
    counts = usage_of(adapter, hostile)
    assert all(c is None or c == 0 for c in counts.values()), counts


def test_a_count_up_to_the_bound_is_kept() -> None:
    assert int_field(MAX_TOKEN_COUNT) == MAX_TOKEN_COUNT
    assert int_field(2_000_000) == 2_000_000
    assert int_field(MAX_TOKEN_COUNT + 1) == 0
