"""The SSE data encoder built once (issue 26) writes what ``JSONEncoder`` writes."""

from __future__ import annotations

import json
from decimal import Decimal
from enum import StrEnum
from typing import Any

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.strategies import json_values
from turnstate.core._citations import Citation
from turnstate.core._context import ContextSnapshot, Severity, TokenSource
from turnstate.core._conversation import Usage
from turnstate.core._cost import TurnCost
from turnstate.core._event_json import event_json, plain
from turnstate.core._events import (
    ContextSnapshotEvent,
    ProviderFailure,
    StateChanged,
    TextDeltaEvent,
    TurnAborted,
    TurnCompleted,
    TurnStats,
)
from turnstate.core._json import tree_encoder
from turnstate.core._path import PathStep
from turnstate.server._views import camel_keys

_texts = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=12)
_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | _texts,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_texts, inner, max_size=4),
    max_leaves=12)


@given(_values | json_values())
def test_the_encoder_writes_what_jsonencoder_writes(value: Any) -> None:
    """Byte for byte, both ways of escaping (NaN, big integers, line separators too)."""
    for ascii_only in (False, True):
        expected = json.dumps(value, ensure_ascii=ascii_only, separators=(",", ":"))
        assert tree_encoder(ensure_ascii=ascii_only)(value) == expected


def test_the_encoder_refuses_what_json_refuses() -> None:
    with pytest.raises(TypeError):
        tree_encoder()({"when": object()})
    with pytest.raises(TypeError):
        tree_encoder()({(1, 2): "a tuple key"})


class Colour(StrEnum):
    RED = "red"


def test_plain_keeps_enum_values_and_nested_records() -> None:
    """A str enum stays its value; records nest, camelCased; lists of records too."""
    step = PathStep(source=Colour.RED, trigger="t", dest="d", reason="why")
    event = TurnCompleted(turn_id="t", chat_id="c", strategy=Colour.RED, degradation=None,
                          path=(step, step), text="x", stats=TurnStats(requests=2))
    value = plain(event)
    assert value["strategy"] == "red" and value["path"][1]["reason"] == "why"
    assert value["stats"]["requests"] == 2 and value["stats"]["usage"]["inputTokens"] == 0
    assert json.loads(event_json(event)) == value
    for small in (StateChanged(source="a", trigger="b", dest="c"), TextDeltaEvent(text="é")):
        assert plain(small) == camel_keys(attrs.asdict(small))


_any_texts = st.text(max_size=12)  # lone surrogates, quotes, controls and separators too


def _general(event: Any, ascii_only: bool) -> str:
    return tree_encoder(ensure_ascii=ascii_only)(plain(event))


@given(_any_texts, _any_texts, _any_texts, st.none() | _any_texts)
def test_deltas_and_state_changes_are_written_as_the_general_encoder_writes_them(
        text: str, source: str, trigger: str, reason: str | None) -> None:
    """The direct path of the two commonest events (issue 26) gives the same text, both
    ways of escaping, a str enum's value included."""
    events = (TextDeltaEvent(text=text), StateChanged(source=source, trigger=trigger,
                                                      dest=Colour.RED, reason=reason))
    for event in events:
        for ascii_only in (False, True):
            assert event_json(event, ascii_only=ascii_only) == _general(event, ascii_only)


def test_a_field_that_is_not_a_string_takes_the_general_path() -> None:
    odd = StateChanged(source="a", trigger="b", dest="c", reason=7)  # type: ignore[arg-type]
    assert event_json(odd) == _general(odd, False) and '"reason":7' in event_json(odd)


def test_deltas_and_state_changes_skip_the_tree_builder(monkeypatch: pytest.MonkeyPatch,
                                                        ) -> None:
    """The direct path builds no intermediate dict (``plain`` is not called)."""
    from turnstate.core import _event_json

    def refuse(value: Any) -> Any:
        raise AssertionError("plain() called")

    monkeypatch.setattr(_event_json, "plain", refuse)
    assert event_json(TextDeltaEvent(text="hi")) == '{"text":"hi","type":"text_delta"}'
    assert event_json(StateChanged(source="a", trigger="b", dest="c")).startswith(
        '{"source":"a"')


_counts = st.integers(min_value=0, max_value=2**70)
_steps = st.builds(PathStep, source=_any_texts, trigger=_any_texts, dest=_any_texts,
                   reason=st.none() | _any_texts)
_money = st.decimals(min_value=0, max_value=10, places=7, allow_nan=False)
_stats = st.builds(
    TurnStats, requests=_counts, request_bytes=_counts, tool_calls=_counts,
    usage=st.builds(Usage, input_tokens=_counts, output_tokens=_counts,
                    cached_input_tokens=_counts, reasoning_tokens=_counts,
                    cache_hit_tokens=st.none() | _counts, cache_miss_tokens=st.none() | _counts,
                    cache_write_tokens=_counts),
    cost=st.none() | st.builds(TurnCost, input=_money, cached_input=_money,
                               cache_write=_money, output=_money))
_maybe = st.none() | _any_texts
_final_events = st.one_of(
    st.builds(TurnCompleted, turn_id=_any_texts, chat_id=_any_texts, strategy=_any_texts,
              degradation=_maybe, path=st.lists(_steps, max_size=3).map(tuple),
              text=_any_texts, stats=_stats, finish_reason=_any_texts, finish_reason_raw=_maybe,
              citations=st.lists(st.builds(  # wire6: the general path writes them
                  Citation, kind=_any_texts, url=_maybe, title=_maybe,
                  start=st.none() | st.integers(0, 99)), max_size=2).map(tuple)),
    st.builds(TurnAborted, turn_id=_any_texts, chat_id=_any_texts, reason=_any_texts,
              detail=_maybe, strategy=_maybe, degradation=_maybe,
              path=st.lists(_steps, max_size=3).map(tuple), stats=_stats,
              failure=st.none() | st.builds(ProviderFailure, provider=_any_texts,
                                            status=st.none() | st.integers(100, 599),
                                            error_type=_any_texts)),
    st.builds(ContextSnapshotEvent, snapshot=st.builds(
        ContextSnapshot, estimated_input_tokens=_counts, context_limit=_counts,
        estimated_usage_ratio=st.floats(), severity=st.sampled_from(Severity),
        source=st.sampled_from(TokenSource))))


@given(_final_events)
def test_final_events_and_snapshots_are_written_as_the_general_encoder_writes_them(
        event: Any) -> None:
    """The direct path of the final events and the context snapshot (issue 26) gives the
    same text as ``plain`` and the tree encoder, both ways of escaping: any strings (lone
    surrogates too), big counts, NaN and infinite ratios, costs or none, failures."""
    for ascii_only in (False, True):
        assert event_json(event, ascii_only=ascii_only) == _general(event, ascii_only)


def test_final_events_and_snapshots_skip_the_tree_builder(monkeypatch: pytest.MonkeyPatch,
                                                          ) -> None:
    """A served cursor turn's final event and context snapshot are written without
    ``plain`` (the tree builder and the C encoder cost a fifth of a stubbed served turn's
    instructions before, issue 26); a field of an odd type still takes the general path."""
    from turnstate.core import _event_json

    step = PathStep(source="persist", trigger="committed", dest="done")
    stats = TurnStats(requests=1, request_bytes=305, usage=Usage(input_tokens=73),
                      cost=TurnCost(input=Decimal("0.0001825"), cached_input=Decimal(0),
                                    cache_write=Decimal(0), output=Decimal("0.00044")))
    events = (TurnCompleted(turn_id="t", chat_id="c", strategy="cursor", degradation=None,
                            path=(step,), text="hi", stats=stats),
              TurnAborted(turn_id="t", chat_id="c", reason="cancelled", detail=None,
                          strategy=None, degradation=None, path=(step,), stats=stats),
              ContextSnapshotEvent(snapshot=ContextSnapshot(
                  estimated_input_tokens=73, context_limit=128000,
                  estimated_usage_ratio=0.0005703125, severity=Severity.NORMAL,
                  source=TokenSource.PROVIDER)))
    expected = [_general(event, False) for event in events]
    odd = attrs.evolve(events[0], stats=attrs.evolve(stats, requests=True))

    def refuse(value: Any) -> Any:
        raise AssertionError("plain() called")

    monkeypatch.setattr(_event_json, "plain", refuse)
    assert [event_json(event) for event in events] == expected
    with pytest.raises(AssertionError, match="plain"):
        event_json(odd)  # a bool where a count is due: the general path (it writes true)
