"""The storage converter: stored shapes, round trips, timestamps, refusals."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.storage.support import audit, commit, envelope, loop_state
from tests.strategies import aware_datetimes, stored_parts
from turnstate.core._context import part_chars
from turnstate.core._conversation import (
    PART_TAGS,
    Part,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    TransitionPart,
)
from turnstate.core._errors import PersistenceRefused, StorageError
from turnstate.storage._records import (
    commit_columns,
    decode_parts,
    encode_parts,
    format_ts,
    parse_ts,
    stored_chars,
    utf8_safe,
)


def test_parts_are_tagged_with_part_tags_and_camel_case_keys() -> None:
    """Each part is stored as an object tagged ``type`` from PART_TAGS, keys in camelCase."""
    parts: tuple[Part, ...] = (
        TextPart(text="t"),
        ReasoningPart(provider="p", model="m", kind="thinking"),
        ToolCallPart(call_id="c", name="n", arguments="{}"),
        ToolResultPart(call_id="c", name="n", output="o"),
        TransitionPart(reason="r", strategy="replay", source_state="validate"),
    )
    stored = json.loads(encode_parts(parts))
    assert [item["type"] for item in stored] == [PART_TAGS[type(p)] for p in parts]
    assert set(stored[2]) == {"type", "callId", "name", "arguments", "provider", "model",
                              "signature"}
    assert stored[3]["isError"] is False and stored[4]["sourceState"] == "validate"
    assert stored[4]["recovered"] is False


@given(st.lists(stored_parts(), max_size=6))
def test_parts_round_trip(parts: list[Part]) -> None:
    """Any parts, lone surrogates included, decode to what was encoded, as UTF-8 text."""
    text = encode_parts(parts)
    text.encode("utf-8")  # always storable
    assert decode_parts(text) == tuple(parts)


@given(st.lists(stored_parts(), max_size=6))
def test_stored_parts_count_what_the_context_estimate_counts(parts: list[Part]) -> None:
    """Counting a stored parts column gives ``part_chars`` of the parts themselves."""
    assert stored_chars(encode_parts(parts)) == part_chars(parts)


def test_lone_surrogates_are_escaped_not_lost() -> None:
    """Text holding a lone surrogate is stored ASCII-escaped; other text stays readable."""
    assert encode_parts([TextPart(text="é")]) == '[{"text":"é","type":"text"}]'
    escaped = encode_parts([TextPart(text="a\ud800é")])
    assert escaped == '[{"text":"a\\ud800\\u00e9","type":"text"}]'
    assert decode_parts(escaped) == (TextPart(text="a\ud800é"),)
    assert utf8_safe('{"a":"\ud800"}') == '{"a":"\\ud800"}'


@pytest.mark.parametrize("text", [
    "{}", '"text"', "[1]", '[{"type":"unknown"}]', '[{"type":"text"}]',
    '[{"type":"text","text":5}]', "[{", '[{"type":"text","text":NaN}]',
])
def test_unreadable_parts_raise_storage_error(text: str) -> None:
    """A corrupt parts column is a StorageError, never another exception."""
    with pytest.raises(StorageError):
        decode_parts(text)
    if text != '[{"type":"unknown"}]':  # counting skips a part it does not count
        with pytest.raises(StorageError):
            stored_chars(text)


def test_timestamps_are_fixed_width_utc() -> None:
    """Timestamps are fixed-width ``Z`` text; offsets convert to UTC, naive counts as UTC."""
    assert format_ts(datetime(2026, 1, 31, 12, tzinfo=UTC)) == "2026-01-31T12:00:00.000000Z"
    east = timezone(timedelta(hours=5, minutes=30))
    assert format_ts(datetime(2026, 1, 31, 17, 30, 0, 5, tzinfo=east)) == (
        "2026-01-31T12:00:00.000005Z")
    assert format_ts(datetime(2026, 1, 31, 12)) == "2026-01-31T12:00:00.000000Z"
    assert format_ts(datetime(5, 1, 1, tzinfo=UTC)) == "0005-01-01T00:00:00.000000Z"


@given(aware_datetimes, aware_datetimes)
def test_timestamp_text_order_is_time_order(first: datetime, second: datetime) -> None:
    """Comparing stored timestamp texts compares the times (SQL relies on it)."""
    a, b = format_ts(first), format_ts(second)
    assert (a < b) == (first < second) and (a == b) == (first == second)
    assert parse_ts(a) == first


def test_commit_columns_refuse_loop_states_and_keep_durable_ones() -> None:
    """Loop states and loop markers are refused; a durable cursor is kept as serialised."""
    for record in (commit(provider_state=loop_state()),
                   commit(provider_state=envelope(loop_messages=({"a": 1},))),
                   commit(audit=audit(metadata={"nested": [{"loopMessages": 1}]}))):
        with pytest.raises(PersistenceRefused):
            commit_columns(record)
    columns = commit_columns(commit("resp_7"))
    assert columns.provider_state is not None
    assert json.loads(columns.provider_state)["cursor"] == "resp_7"
    assert '"recovered":true' in commit_columns(commit(parts=(
        TransitionPart(reason="r", strategy="replay", source_state="validate"),))).parts
