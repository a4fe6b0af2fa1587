"""Fast paths of the row encoders (issue 26), each held to the general path it skips:
timestamps of the clocks' own UTC values, and a parts column of plain text parts."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.helpers import record_calls
from turnstate.core._conversation import TextPart, ToolResultPart, TransitionPart
from turnstate.core._convert import format_utc
from turnstate.core._json import canonical_json, compact_json
from turnstate.core._media import FilePart, ImagePart
from turnstate.core._path import PathStep
from turnstate.storage import _records
from turnstate.storage._records import encode_parts, encode_path, format_ts

ZONES = st.sampled_from([UTC, timezone(timedelta(hours=5, minutes=30)),
                         timezone(timedelta(hours=-8)), timezone(timedelta(0))])


def _old_format_ts(value: datetime) -> str:
    aware = value.replace(tzinfo=UTC) if value.utcoffset() is None else value
    return aware.astimezone(UTC).isoformat(timespec="microseconds").removesuffix("+00:00") + "Z"


def _old_format_utc(value: datetime) -> str:
    aware = value.replace(tzinfo=UTC) if value.utcoffset() is None else value
    return aware.astimezone(UTC).isoformat().removesuffix("+00:00") + "Z"


BOUNDED = st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30))


@given(BOUNDED, st.one_of(st.none(), ZONES))
def test_timestamps_read_as_before(value: datetime, zone: timezone | None) -> None:
    value = value.replace(tzinfo=zone)
    assert format_ts(value) == _old_format_ts(value)
    assert format_utc(value) == _old_format_utc(value)


def test_a_utc_timestamp_is_formatted_without_conversion() -> None:
    value = datetime(2026, 12, 3, 18, 0, 0, tzinfo=UTC)
    assert format_ts(value) == "2026-12-03T18:00:00.000000Z"
    assert format_utc(value) == "2026-12-03T18:00:00Z"
    assert format_utc(value.replace(microsecond=5)) == "2026-12-03T18:00:00.000005Z"


def test_a_parts_column_is_the_converters() -> None:
    parts = [TextPart(text="héllo \ud800"), TextPart(text="b", phase="final_answer"),
             ImagePart(url="https://example.test/a.png"),
             FilePart(data=b"%PDF-1.4", filename="a.pdf"),
             ToolResultPart(call_id="c", name="n", output="{}"),
             TransitionPart(reason="r", strategy="replay", source_state="cursor")]
    for chosen in ([], parts[:1], parts[1:2], parts):
        expected = _records._dump(_records._unstructure_parts(tuple(chosen)), "parts")
        assert encode_parts(chosen) == expected


def test_a_path_step_written_once_is_not_encoded_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """A turn's path is a few edges of the table, written again every turn: each step's
    JSON is kept by its fields, and the path is the same text the converter writes."""
    path = [PathStep(source="validate", trigger="continue_with_cursor", dest="cursor"),
            PathStep(source="cursor", trigger="completed", dest="persist", reason="é\ud800")]
    reference = _records._dump(_records._converter.unstructure(tuple(path),
                                                               tuple[PathStep, ...]), "ref")
    assert encode_path(path) == reference
    encoded = record_calls(monkeypatch, _records._encode, (_records, "_encode"))
    assert encode_path(path) == reference and encode_path([]) == "[]"
    assert encoded == []
    odd = [PathStep(source="a", trigger="b", dest="c", reason=["not", "hashable"])]  # type: ignore[arg-type]
    assert encode_path(odd) == _records._dump(
        _records._converter.unstructure(tuple(odd), tuple[PathStep, ...]), "ref")


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner,
                                                                 max_size=4),
    max_leaves=20)


@given(JSON)
def test_compact_and_canonical_json_are_the_stdlibs(value: object) -> None:
    assert compact_json(value) == json.dumps(value, separators=(",", ":"),
                                             ensure_ascii=False, allow_nan=False)
    assert canonical_json(value) == json.dumps(value, sort_keys=True, separators=(",", ":"),
                                               ensure_ascii=False, allow_nan=False)


def test_compact_json_fails_as_the_stdlib_does() -> None:
    cycle: list[object] = []
    cycle.append(cycle)
    deep: list[object] = []
    for _ in range(100_000):
        deep = [deep]
    for encode in (compact_json, canonical_json):
        with pytest.raises(ValueError, match="Circular reference detected"):
            encode(cycle)
        with pytest.raises(ValueError, match="Out of range float"):
            encode({"x": float("nan")})
        with pytest.raises(TypeError, match="not JSON serializable"):
            encode({"x": object()})
        with pytest.raises(RecursionError):
            encode(deep)


def test_compact_json_builds_no_encoder_per_call(monkeypatch: pytest.MonkeyPatch) -> None:
    """The C encoder is built once (``JSONEncoder.iterencode`` built one per call)."""
    def built(*_: object, **__: object) -> object:
        raise AssertionError("an encoder was built")

    monkeypatch.setattr(json.JSONEncoder, "iterencode", built)
    assert compact_json({"model": "m", "input": [{"role": "user"}], "n": 1.5}) == \
        '{"model":"m","input":[{"role":"user"}],"n":1.5}'
    assert canonical_json({"b": 1, "a": "é"}) == '{"a":"é","b":1}'
