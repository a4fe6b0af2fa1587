"""The continuation envelope: parsing, serialising, and refusing everything else."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta, timezone, tzinfo
from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from tests.strategies import (
    ENVELOPE_FIELDS,
    any_envelopes,
    envelope_mapping,
    envelope_mappings_with_value,
    envelopes_with_unknown_version,
    envelopes_with_wrong_field,
    huge_integer_envelope_texts,
    huge_ints,
    json_values,
    near_valid_envelope_mappings,
    nested_text,
    nested_value,
    non_finite_envelope_texts,
    non_finite_floats,
    offset_timezones,
    simple_envelope_mappings,
)
from turnstate.core import (
    ConfigurationError,
    ContinuationEnvelope,
    EnvelopeMalformed,
    Mode,
    _envelope,
    parse_envelope,
    serialize_envelope,
)
from turnstate.core._convert import format_utc, parse_utc
from turnstate.core._envelope import (
    KNOWN_ENVELOPES,
    KNOWN_TEXT_CHARS,
    MAX_ENVELOPE_BYTES,
    _known,
    _reads_back,
    remember_envelope,
)

# DESIGN.md section 2, character for character (including its line break).
SEED = """{"schemaVersion": 1, "provider": "openai", "mode": "responses", "modelName": "gpt-4o",
 "systemPromptHash": "abc123", "toolsetHash": "def456", "cursor": "resp_abc123"}"""
SEED_COMPACT = (
    '{"schemaVersion":1,"provider":"openai","mode":"responses","modelName":"gpt-4o",'
    '"systemPromptHash":"abc123","toolsetHash":"def456","cursor":"resp_abc123"}'
)


def expect_malformed(raw: object) -> EnvelopeMalformed:
    """Parse ``raw`` expecting EnvelopeMalformed; any other exception fails the test."""
    with pytest.raises(EnvelopeMalformed) as caught:
        parse_envelope(raw)
    assert isinstance(caught.value, ValueError)
    assert caught.value.detail
    assert len(caught.value.detail) <= 200  # the input is never echoed back in full
    return caught.value


def label(detail: str) -> str:
    """A coarse bucket for a rejection detail, for hypothesis statistics."""
    buckets = {
        "schemaVersion": "schema version", "utf-8": "not utf-8", "expected": "wrong type",
        "missing": "missing field", "non-finite": "non-finite", "too large": "too large",
        "nested": "too deep", "not a valid": "bad enum", "timestamp": "bad timestamp",
        "cursor": "cursor rule", "loopMessages": "loop rule", "coversSeq": "negative seq",
    }
    return next((name for key, name in buckets.items() if key in detail), "json syntax/other")


def seed_mapping() -> dict[str, Any]:
    return {
        "schemaVersion": 1, "provider": "openai", "mode": "responses", "modelName": "gpt-4o",
        "systemPromptHash": "abc123", "toolsetHash": "def456", "cursor": "resp_abc123",
    }


# ----------------------------------------------------------------------------- accepted


def test_seed_example_parses_exactly_as_written() -> None:
    """The DESIGN.md example, with its spaces and line break, gives exactly its fields."""
    envelope = parse_envelope(SEED)
    assert envelope.schema_version == 1
    assert envelope.provider == "openai"
    assert envelope.mode is Mode.RESPONSES
    assert envelope.model_name == "gpt-4o"
    assert envelope.system_prompt_hash == "abc123"
    assert envelope.toolset_hash == "def456"
    assert envelope.cursor == "resp_abc123"
    assert envelope.created_at is None
    assert envelope.covers_seq is None
    assert envelope.metadata is None
    assert envelope.loop_messages is None


@pytest.mark.parametrize(
    "raw",
    [
        SEED,
        SEED.encode(),
        bytearray(SEED.encode()),
        memoryview(SEED.encode()),
        seed_mapping(),
        MappingProxyType(seed_mapping()),
    ],
    ids=["str", "bytes", "bytearray", "memoryview", "dict", "mapping-proxy"],
)
def test_parse_accepts_text_bytes_and_mappings(raw: object) -> None:
    """The seed parses to the same envelope from text, bytes-like values and mappings."""
    assert parse_envelope(raw) == parse_envelope(SEED)


def test_serialize_is_compact_camel_case_with_schema_version_first() -> None:
    """The seed serialises to compact camelCase JSON, schemaVersion first, None fields left out."""
    assert serialize_envelope(parse_envelope(SEED)) == SEED_COMPACT


def test_serialize_writes_every_optional_field_in_utc() -> None:
    """All optional fields are written, ``createdAt`` converted to UTC with a ``Z``."""
    envelope = ContinuationEnvelope(
        provider="anthropic", mode=Mode.STATELESS_LOOP, model_name="claude-sonnet-4-5",
        system_prompt_hash="s", toolset_hash="t",
        created_at=datetime(2026, 1, 31, 14, 0, 0, 500_000, tzinfo=timezone(timedelta(hours=2))),
        covers_seq=7, metadata={"cache": {"hit": 3}}, loop_messages=({"role": "user"},),
    )
    assert serialize_envelope(envelope) == (
        '{"schemaVersion":1,"provider":"anthropic","mode":"stateless-loop",'
        '"modelName":"claude-sonnet-4-5","systemPromptHash":"s","toolsetHash":"t",'
        '"createdAt":"2026-01-31T12:00:00.500000Z","coversSeq":7,'
        '"metadata":{"cache":{"hit":3}},"loopMessages":[{"role":"user"}]}'
    )


def test_created_at_is_normalised_to_utc_and_naive_times_are_refused() -> None:
    """An aware ``created_at`` is stored in UTC; a naive one is a ConfigurationError."""
    local = datetime(2026, 5, 1, 12, tzinfo=timezone(timedelta(hours=-7)))
    envelope = ContinuationEnvelope(provider="openai", mode=Mode.RESPONSES, model_name="m",
                                    system_prompt_hash="s", toolset_hash="t", cursor="c",
                                    created_at=local)
    assert envelope.created_at == local
    assert envelope.created_at is not None and envelope.created_at.tzinfo is UTC
    with pytest.raises(ConfigurationError, match="aware"):
        ContinuationEnvelope(provider="openai", mode=Mode.RESPONSES, model_name="m",
                             system_prompt_hash="s", toolset_hash="t", cursor="c",
                             created_at=datetime(2026, 5, 1, 12))


@pytest.mark.parametrize("stamp", ["2026-01-31T12:00:00Z", "2026-01-31T12:00:00z",
                                   "2026-01-31T12:00:00+00:00", "2026-01-31T13:30:00+01:30"])
def test_created_at_accepts_any_offset_and_reads_it_as_utc(stamp: str) -> None:
    """``createdAt`` with ``Z`` or any offset parses to the same aware UTC instant."""
    envelope = parse_envelope({**seed_mapping(), "createdAt": stamp})
    assert envelope.created_at == datetime(2026, 1, 31, 12, tzinfo=UTC)
    assert envelope.created_at is not None and envelope.created_at.tzinfo is UTC


def test_format_utc_writes_utc_with_z_and_reads_naive_values_as_utc(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``format_utc`` converts to UTC (never the machine's zone) and ``parse_utc`` inverts it."""
    aware = datetime(2026, 1, 31, 14, 0, 0, 500_000, tzinfo=timezone(timedelta(hours=2)))
    assert format_utc(aware) == "2026-01-31T12:00:00.500000Z"
    # A machine five hours west of UTC (POSIX TZ syntax: no tz database needed).
    monkeypatch.setenv("TZ", "WEST+5")
    time.tzset()
    try:
        assert format_utc(datetime(2026, 1, 31, 12)) == "2026-01-31T12:00:00Z"
    finally:
        monkeypatch.undo()
        time.tzset()
    assert parse_utc(format_utc(aware)) == aware
    with pytest.raises(ValueError, match="offset"):
        parse_utc("2026-01-31T12:00:00")


def test_null_optional_fields_read_as_absent() -> None:
    """An explicit JSON null in an optional field is the same as leaving it out."""
    nulls = {"createdAt": None, "coversSeq": None, "metadata": None}
    assert parse_envelope({**seed_mapping(), **nulls}) == parse_envelope(SEED)
    loop = {**seed_mapping(), "mode": "stateless-loop", "cursor": None, "loopMessages": None}
    assert parse_envelope(loop).loop_messages is None


def test_moderately_nested_metadata_is_accepted() -> None:
    """Metadata nested 32 levels deep is still an acceptable envelope."""
    deep = nested_value(32)
    assert parse_envelope({**seed_mapping(), "metadata": {"deep": deep}}).metadata == {
        "deep": deep}


@given(any_envelopes, offset_timezones, st.booleans())
def test_round_trip_and_stored_form(envelope: ContinuationEnvelope, offset: tzinfo,
                                    zulu: bool) -> None:
    """``parse_envelope(serialize_envelope(e)) == e``; the text is compact camelCase JSON with
    schemaVersion first, known keys only and no nulls; and a stored form written by hand
    (``createdAt`` in any offset or with ``Z``) parses to ``e`` as a mapping, text or bytes."""
    event(f"mode={envelope.mode}")
    present = [name for name in ("created_at", "covers_seq", "metadata", "loop_messages")
               if getattr(envelope, name) is not None]
    event(f"optional fields drawn: {len(present)}")
    text = serialize_envelope(envelope)
    remembered = parse_envelope(text)  # an envelope this process wrote: maybe not decoded
    _known.clear()  # so the text is decoded here
    assert parse_envelope(text) == envelope == remembered
    assert parse_envelope(text.encode("utf-8")) == envelope
    data = json.loads(text)
    assert text == json.dumps(data, separators=(",", ":"), ensure_ascii=False)
    assert next(iter(data)) == "schemaVersion"
    assert set(data) <= set(ENVELOPE_FIELDS)
    assert None not in data.values()
    expected = envelope_mapping(envelope)
    if envelope.created_at is not None:
        assert data["createdAt"].endswith("Z")
        assert parse_utc(data.pop("createdAt")) == parse_utc(expected.pop("createdAt"))
    assert data == expected

    mapping = envelope_mapping(envelope, offset=offset, zulu=zulu)
    assert parse_envelope(mapping) == envelope
    assert parse_envelope(json.dumps(mapping)) == envelope
    assert parse_envelope(json.dumps(mapping, ensure_ascii=False).encode("utf-8")) == envelope


_unknown_keys = st.text(max_size=12).filter(lambda k: k not in ENVELOPE_FIELDS)


@given(simple_envelope_mappings,
       st.dictionaries(_unknown_keys, json_values(3), min_size=1, max_size=3))
def test_unknown_keys_are_ignored(mapping: dict[str, Any], extra: dict[str, Any]) -> None:
    """Keys the reader does not know do not change the envelope, wherever they appear."""
    expected = parse_envelope(mapping)
    assert parse_envelope({**extra, **mapping}) == expected
    assert parse_envelope(json.dumps({**mapping, **extra})) == expected


# ----------------------------------------------------------------------------- refused


@given(st.text())
def test_arbitrary_text_is_malformed(text: str) -> None:
    """Any text at all is refused with EnvelopeMalformed and nothing else."""
    event(label(expect_malformed(text).detail))


@given(st.binary())
def test_arbitrary_bytes_are_malformed(raw: bytes) -> None:
    """Any bytes at all are refused with EnvelopeMalformed and nothing else."""
    event(label(expect_malformed(raw).detail))


@given(json_values())
def test_arbitrary_json_values_are_malformed(value: Any) -> None:
    """Any JSON value, as a Python value and as its text, is refused with EnvelopeMalformed."""
    event(f"top level {type(value).__name__}")
    expect_malformed(value)
    expect_malformed(json.dumps(value))


@given(near_valid_envelope_mappings())
def test_near_valid_mappings_parse_or_are_malformed(mapping: dict[str, Any]) -> None:
    """A valid stored form with fields dropped or replaced by any JSON value either parses
    (and then round-trips) or raises EnvelopeMalformed: no other outcome exists."""
    try:
        parsed = parse_envelope(mapping)
    except EnvelopeMalformed as exc:
        event(f"refused: {label(exc.detail)}")
        return
    event("accepted")
    assert isinstance(parsed, ContinuationEnvelope)
    assert parse_envelope(serialize_envelope(parsed)) == parsed


@given(envelopes_with_wrong_field())
def test_one_field_of_the_wrong_type_is_malformed(case: tuple[str, dict[str, Any]]) -> None:
    """A valid envelope with any one field of a wrong type (or value) is refused."""
    field, mapping = case
    event(f"field={field}")
    expect_malformed(mapping)
    expect_malformed(json.dumps(mapping))


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("schemaVersion", "1"), ("schemaVersion", 1.0), ("schemaVersion", None),
        ("provider", 1), ("mode", "durable"), ("mode", ["responses"]), ("modelName", None),
        ("systemPromptHash", 0), ("toolsetHash", {"h": 1}), ("cursor", 12),
        ("createdAt", 1767225600), ("createdAt", "2026-01-01T00:00:00"), ("coversSeq", "3"),
        ("coversSeq", 3.0), ("coversSeq", True), ("coversSeq", -1), ("metadata", [1]),
        ("metadata", "{}"),
    ],
)
def test_each_field_refuses_a_wrong_type(field: str, value: Any) -> None:
    """Every field refuses a value of another JSON type (a fixed example per field)."""
    expect_malformed({**seed_mapping(), field: value})


@pytest.mark.parametrize(("field", "value"), [
    ("loopMessages", "[]"), ("loopMessages", {"role": "user"}), ("loopMessages", [1]),
    ("loopMessages", [{"role": "user"}, "text"]), ("cursor", 7), ("cursor", ["c"]),
])
def test_stateless_loop_fields_refuse_a_wrong_type(field: str, value: Any) -> None:
    """A stateless-loop state refuses loop messages that are not a list of objects."""
    loop = {**seed_mapping(), "mode": "stateless-loop", "cursor": None, "loopMessages": []}
    assert parse_envelope(loop).loop_messages == ()
    expect_malformed({**loop, field: value})


@given(envelopes_with_unknown_version())
def test_unknown_schema_versions_are_malformed(mapping: dict[str, Any]) -> None:
    """Any integer schemaVersion other than 1 is refused, however valid the rest is."""
    event("negative" if mapping["schemaVersion"] < 0 else "positive or zero")
    assert "schemaVersion" in expect_malformed(mapping).detail
    expect_malformed(json.dumps(mapping))


@pytest.mark.parametrize("version", [True, False])
def test_bool_schema_version_is_malformed(version: bool) -> None:
    """``true`` is not the integer 1 (although ``True == 1`` in Python)."""
    expect_malformed({**seed_mapping(), "schemaVersion": version})
    expect_malformed(json.dumps({**seed_mapping(), "schemaVersion": version}))


def test_missing_schema_version_or_required_field_is_malformed() -> None:
    """Leaving out schemaVersion or any required field is refused."""
    for key in ("schemaVersion", "provider", "mode", "modelName", "systemPromptHash",
                "toolsetHash"):
        mapping = seed_mapping()
        del mapping[key]
        expect_malformed(mapping)


@given(non_finite_envelope_texts)
def test_nan_and_infinity_in_text_are_malformed(text: str) -> None:
    """NaN, the infinities and overflowing exponents anywhere in the text are refused."""
    event(label(expect_malformed(text).detail))
    expect_malformed(text.encode())


@given(envelope_mappings_with_value(non_finite_floats))
def test_nan_and_infinity_in_mappings_are_malformed(mapping: dict[str, Any]) -> None:
    """A non-finite float anywhere in a mapping, even under an unknown key, is refused."""
    expect_malformed(mapping)


@given(huge_integer_envelope_texts)
def test_integers_with_hundreds_to_thousands_of_digits_are_malformed(text: str) -> None:
    """Integers too wide for JSON readers (up to past the interpreter's digit limit) are refused."""
    event(label(expect_malformed(text).detail))


@given(envelope_mappings_with_value(huge_ints))
def test_huge_integers_in_mappings_are_malformed(mapping: dict[str, Any]) -> None:
    """An integer wider than 1024 bits anywhere in a mapping is refused."""
    expect_malformed(mapping)


@pytest.mark.parametrize("kind", ["list", "object"])
@pytest.mark.parametrize("depth", [65, 500, 2_000, 100_000])
def test_very_deep_nesting_in_text_is_malformed(depth: int, kind: str) -> None:
    """Text nested past the limit, up to far past the recursion limit, is refused."""
    expect_malformed(nested_text(depth, kind=kind))
    expect_malformed(nested_text(depth, kind=kind).encode())


@pytest.mark.parametrize("kind", ["dict", "list"])
@pytest.mark.parametrize("depth", [100, 5_000, 50_000])
@pytest.mark.parametrize("where", ["metadata", "unknownKey", "loopMessages"])
def test_very_deep_nesting_in_mappings_is_malformed(depth: int, kind: str, where: str) -> None:
    """Python mappings nested thousands of levels deep are refused, not recursed into."""
    mapping = {**seed_mapping(), where: {"deep": nested_value(depth, kind=kind)}}
    if where == "loopMessages":
        mapping.update(mode="stateless-loop", cursor=None)
        mapping[where] = [mapping[where]]
    expect_malformed(mapping)


def test_self_referencing_mapping_is_malformed() -> None:
    """A mapping that contains itself is refused instead of looping forever."""
    cycle: dict[str, Any] = {}
    cycle["again"] = cycle
    expect_malformed({**seed_mapping(), "metadata": cycle})


@pytest.mark.parametrize("key", [1, None, ("a", "b"), b"metadata", 1.5])
@pytest.mark.parametrize("where", ["top", "metadata"])
def test_non_string_keys_in_a_mapping_are_malformed(key: object, where: str) -> None:
    """A key that is not a string, at the top or nested, is refused (JSON has none)."""
    mapping: dict[Any, Any] = seed_mapping()
    if where == "top":
        mapping[key] = "x"
    else:
        mapping["metadata"] = {"ok": {key: 1}}
    expect_malformed(mapping)


@pytest.mark.parametrize("value", [{1, 2}, b"bytes", iter(()), object(), 1j])
def test_non_json_python_values_in_a_mapping_are_malformed(value: object) -> None:
    """Python values with no JSON form are refused wherever they sit in a mapping."""
    expect_malformed({**seed_mapping(), "metadata": {"v": value}})
    expect_malformed({**seed_mapping(), "cursor": value})


@pytest.mark.parametrize("raw", [None, 0, 1.5, True, [], ["schemaVersion"], object(), {1, 2},
                                 "", " ", "null", "[]", "1", '"text"', b"", str(seed_mapping())])
def test_values_that_are_not_json_objects_are_malformed(raw: object) -> None:
    """Inputs that are not an object (nor its text) are refused."""
    expect_malformed(raw)


@pytest.mark.parametrize("mode", ["responses", "interactions"])
@pytest.mark.parametrize("cursor", ["absent", None])
def test_durable_mode_without_cursor_is_malformed(mode: str, cursor: str | None) -> None:
    """A durable mode needs a cursor string; a missing or null one is refused."""
    mapping: dict[str, Any] = {**seed_mapping(), "mode": mode}
    if cursor == "absent":
        del mapping["cursor"]
    else:
        mapping["cursor"] = cursor
    expect_malformed(mapping)


@pytest.mark.parametrize("cursor", ["", "   ", "\t\n"])
def test_blank_durable_cursor_parses(cursor: str) -> None:
    """An empty or blank cursor is a string: not a parse error (validation calls it invalid)."""
    assert parse_envelope({**seed_mapping(), "cursor": cursor}).cursor == cursor


@pytest.mark.parametrize("mode", ["responses", "interactions"])
@pytest.mark.parametrize("loop", [[], [{"role": "user", "content": "hi"}]])
def test_loop_messages_on_a_durable_mode_are_malformed(mode: str, loop: list[Any]) -> None:
    """``loopMessages`` belong to stateless loops only, even an empty list."""
    mapping = {**seed_mapping(), "mode": mode, "loopMessages": loop}
    expect_malformed(mapping)
    expect_malformed(json.dumps(mapping))


def test_oversized_values_are_refused_unread() -> None:
    """A stored value larger than the envelope limit is refused as text and as bytes."""
    text = json.dumps({**seed_mapping(), "metadata": {"pad": "x" * MAX_ENVELOPE_BYTES}})
    assert "too large" in expect_malformed(text).detail
    assert "too large" in expect_malformed(text.encode()).detail


# ------------------------------------------------------------------ envelopes kept by text


def _undecodable(_: object) -> Any:
    raise AssertionError("the envelope was decoded")


def _cursor_envelope(cursor: str = "resp_kept") -> ContinuationEnvelope:
    return ContinuationEnvelope(
        provider="openai", mode=Mode.RESPONSES, model_name="gpt-4o",
        system_prompt_hash="abc", toolset_hash="def", cursor=cursor,
        created_at=datetime(2026, 12, 3, 14, 0, 0, 123456, tzinfo=UTC), covers_seq=4)


def test_a_remembered_envelope_is_read_back_without_decoding(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A cursor turn reads the envelope its chat's previous turn committed (issue 26):
    the engine remembered the text, so it is neither decoded nor checked again."""
    envelope = _cursor_envelope()
    text = serialize_envelope(envelope)
    remember_envelope(text, envelope)
    monkeypatch.setattr(_envelope, "loads_strict", _undecodable)
    assert parse_envelope(text) is envelope


def test_a_text_read_once_is_not_decoded_again(monkeypatch: pytest.MonkeyPatch) -> None:
    text = serialize_envelope(_cursor_envelope("resp_read"))
    first = parse_envelope(text)
    monkeypatch.setattr(_envelope, "loads_strict", _undecodable)
    assert parse_envelope(text) is first


@given(any_envelopes)
def test_an_envelope_is_kept_only_when_decoding_its_text_gives_it_back(
        envelope: ContinuationEnvelope) -> None:
    """What a remembered text reads as is what decoding it gives: an equal envelope,
    with no metadata or loop messages (nothing a reader could change for the next)."""
    _known.clear()
    text = serialize_envelope(envelope)
    remember_envelope(text, envelope)
    kept = _known.get(text)
    event(f"kept: {kept is not None}")
    assert (kept is not None) == (_reads_back(envelope) and len(text) <= KNOWN_TEXT_CHARS)
    _known.clear()
    decoded = parse_envelope(text)
    assert decoded == envelope
    if kept is not None:
        assert kept is envelope and decoded.metadata is None and decoded.loop_messages is None


def test_a_field_a_store_could_rewrite_is_not_remembered() -> None:
    """A lone surrogate is replaced on its way into a store (``utf8_safe``), so the
    stored text would decode to another envelope: only ASCII fields are remembered."""
    _known.clear()
    envelope = _cursor_envelope("resp_\udc80")
    remember_envelope(serialize_envelope(envelope), envelope)
    assert not _known


def test_envelopes_with_metadata_are_decoded_for_every_reader() -> None:
    envelope = ContinuationEnvelope(
        provider="openai", mode=Mode.RESPONSES, model_name="gpt-4o", system_prompt_hash="a",
        toolset_hash="b", cursor="resp_1", metadata={"compacted": True})
    text = serialize_envelope(envelope)
    remember_envelope(text, envelope)
    first = parse_envelope(text)
    assert first.metadata is not None
    first.metadata["compacted"] = False  # a reader changing its copy
    assert parse_envelope(text).metadata == {"compacted": True}


def test_the_known_texts_are_bounded_in_number_and_length() -> None:
    _known.clear()
    for index in range(KNOWN_ENVELOPES + 10):
        envelope = _cursor_envelope(f"resp_{index}")
        remember_envelope(serialize_envelope(envelope), envelope)
    assert len(_known) == KNOWN_ENVELOPES
    assert not any('"resp_0"' in text for text in _known)  # the oldest went first
    assert any('"resp_10"' in text for text in _known)
    envelope = _cursor_envelope("r" * KNOWN_TEXT_CHARS)
    long = serialize_envelope(envelope)
    remember_envelope(long, envelope)
    assert long not in _known
    assert parse_envelope(long).cursor == "r" * KNOWN_TEXT_CHARS and long not in _known
