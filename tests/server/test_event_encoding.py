"""The SSE data encoder built once (issue 26) writes what ``JSONEncoder`` writes."""

from __future__ import annotations

import json
from enum import StrEnum
from typing import Any

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.strategies import json_values
from turnstate.core._event_json import event_json, plain
from turnstate.core._events import StateChanged, TextDeltaEvent, TurnCompleted, TurnStats
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
