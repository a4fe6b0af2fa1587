"""The storage converter: stored shapes, round trips, timestamps, refusals."""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.storage.support import audit, commit, envelope, loop_state
from tests.strategies import (
    _stored_text,
    aware_datetimes,
    durable_envelopes,
    json_objects,
    json_values,
    stored_parts,
)
from turnstate.core._context import ContextSnapshot, Severity, TokenSource, part_chars
from turnstate.core._conversation import (
    PART_TAGS,
    AuditState,
    Part,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    TransitionPart,
    Usage,
)
from turnstate.core._convert import camel
from turnstate.core._envelope import ContinuationEnvelope, serialize_envelope
from turnstate.core._errors import ConfigurationError, PersistenceRefused, StorageError
from turnstate.core._path import PathStep
from turnstate.storage import _record_encoders as encoders
from turnstate.storage import _records as records
from turnstate.storage._commit_columns import commit_columns, stored_chars
from turnstate.storage._record_encoders import (
    encode_audit,
    encode_context,
    encode_usage,
    envelope_text,
)
from turnstate.storage._records import (
    answer_turn_id,
    decode_parts,
    encode_parts,
    encode_path,
    format_ts,
    lease_expiry,
    message_ids,
    parse_ts,
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


# -- the commit's written-out trees against the converter (issue 26) ---------------------

def _converted(value: Any) -> str:
    """What the one converter makes of a record: the reference every fast path meets."""
    return records._dump(records._converter.unstructure(value), "reference")


_ints = st.integers(min_value=0, max_value=2**63 - 1)
_optional_text = st.none() | _stored_text
_json_metadata = st.none() | json_objects(6, max_size=4) | st.dictionaries(
    st.text(max_size=4), st.tuples(json_values(3)) | st.just(datetime(2026, 1, 1, tzinfo=UTC))
    | st.just(Severity.INFO), max_size=3)


@given(st.builds(Usage, input_tokens=_ints, output_tokens=_ints, cached_input_tokens=_ints,
                 reasoning_tokens=_ints, cache_hit_tokens=st.none() | _ints,
                 cache_miss_tokens=st.none() | _ints, cache_write_tokens=_ints,
                 cache_write_1h_tokens=_ints))
def test_the_usage_text_is_the_converters(usage: Usage) -> None:
    assert encode_usage(usage) == _converted(usage)


_counts = (st.integers() | st.booleans() | st.floats(allow_nan=False, allow_infinity=False)
           | st.none())


@given(st.builds(Usage, input_tokens=_counts, output_tokens=_counts,
                 cached_input_tokens=_counts, reasoning_tokens=_counts,
                 cache_hit_tokens=_counts, cache_miss_tokens=_counts,
                 cache_write_tokens=_counts, cache_write_1h_tokens=_counts))
def test_the_usage_text_of_any_counts_is_the_trees(usage: Usage) -> None:
    """The one-format usage text is the tree's encoding for any values: plain ints take
    the format, anything else (a bool, a float, a None where a count is due) the tree."""
    try:
        expected: str | Exception = encoders._ascii_tree_or_converted(
            usage, encoders._usage_tree, "usage")
    except StorageError as exc:
        expected = exc
    if isinstance(expected, Exception):
        with pytest.raises(StorageError):
            encode_usage(usage)
    else:
        assert encode_usage(usage) == expected


def test_a_usage_count_too_long_for_its_text_is_a_storage_error() -> None:
    """A count with more digits than Python writes as text (``sys.get_int_max_str_digits``)
    is refused as the tree refuses it, a ``StorageError``, not a bare ``ValueError`` out
    of the one-format path (each of a turn's calls may report a count of up to that
    many digits: their sum may exceed it)."""
    if not sys.get_int_max_str_digits():  # pragma: no cover - the limit turned off
        pytest.skip("this interpreter writes ints of any length")
    huge = 10 ** sys.get_int_max_str_digits()
    with pytest.raises(StorageError, match="cannot store usage"):
        encoders._ascii_tree_or_converted(Usage(input_tokens=huge), encoders._usage_tree,
                                         "usage")
    for usage in (Usage(input_tokens=huge), Usage(cache_hit_tokens=huge)):
        with pytest.raises(StorageError, match="cannot store usage"):
            encode_usage(usage)


@given(st.builds(ContextSnapshot, estimated_input_tokens=_ints, context_limit=_ints,
                 estimated_usage_ratio=st.floats(allow_nan=False, allow_infinity=False),
                 severity=st.sampled_from(Severity), source=st.sampled_from(TokenSource)))
def test_the_context_text_is_the_converters(snapshot: ContextSnapshot) -> None:
    assert encode_context(snapshot) == _converted(snapshot)


@given(st.lists(st.builds(PathStep, source=_stored_text, trigger=_stored_text,
                          dest=_stored_text, reason=_optional_text), max_size=4))
def test_the_path_text_is_the_converters(path: list[PathStep]) -> None:
    assert encode_path(path) == records._dump(
        records._converter.unstructure(tuple(path), tuple[PathStep, ...]), "reference")


@given(st.builds(AuditState, provider=_stored_text, model_name=_stored_text,
                 strategy=_stored_text, system_prompt_hash=_stored_text,
                 toolset_hash=_stored_text, cursor=_optional_text, reason=_optional_text,
                 metadata=_json_metadata))
def test_the_audit_text_is_the_converters(state: AuditState) -> None:
    """Plain JSON metadata is encoded as it is; a datetime or an enum in it takes the
    converter's own path; either way the text is the converter's."""
    assert encode_audit(state) == _converted(state)


@given(durable_envelopes(metadata=_json_metadata))
def test_the_stored_envelope_text_is_serialize_envelopes(state: ContinuationEnvelope) -> None:
    assert envelope_text(state) == serialize_envelope(state)


@given(st.lists(stored_parts(), max_size=4))
def test_the_commit_parts_text_is_the_converters(parts: list[Part]) -> None:
    assert records._commit_parts(parts) == encode_parts(records.with_parts_recovered(parts))


def test_the_written_out_trees_name_every_field() -> None:
    """A field added to a record is a field its tree must write (the converter writes it)."""
    def names(cls: Any, *, leave_out: tuple[str, ...] = ()) -> set[str]:
        return {camel(f.name) for f in attrs.fields(cls) if f.name not in leave_out}

    hour = Usage(cache_write_tokens=2, cache_write_1h_tokens=1)
    assert set(encoders._usage_tree(hour)) == names(Usage)
    # ``cacheWrite1hTokens`` 0 is left out by the tree and the converter alike (money4).
    assert set(encoders._usage_tree(Usage())) == names(
        Usage, leave_out=("cache_write_1h_tokens",))
    assert encoders._usage_tree(Usage()) == records._converter.unstructure(Usage())
    assert encoders._usage_tree(hour) == records._converter.unstructure(hour)
    snapshot = ContextSnapshot(estimated_input_tokens=1, context_limit=2,
                               estimated_usage_ratio=0.5, severity=Severity.NORMAL,
                               source=TokenSource.ESTIMATE, dropped_history_chars=3)
    assert set(encoders._context_tree(snapshot)) == names(ContextSnapshot)
    # ``droppedHistoryChars`` 0 is left out by the tree and the converter alike (gemctx).
    unset = attrs.evolve(snapshot, dropped_history_chars=0)
    assert set(encoders._context_tree(unset)) == names(
        ContextSnapshot, leave_out=("dropped_history_chars",))
    assert encoders._context_tree(unset) == records._converter.unstructure(unset)
    assert set(records._path_step_tree(PathStep(source="a", trigger="b", dest="c"))) == (
        names(PathStep))
    assert set(encoders._audit_tree(audit())) == names(AuditState)
    full = envelope(metadata={}, covers_seq=1, created_at=datetime(2026, 1, 1, tzinfo=UTC))
    assert set(json.loads(envelope_text(full))) == names(ContinuationEnvelope,
                                                         leave_out=("loop_messages",))


def test_a_cursor_commit_is_encoded_without_the_converter() -> None:
    """A cursor turn's commit (text part, durable cursor, audit metadata, usage, context,
    path) goes through no cattrs code: the generic dispatch and cattrs walking the audit
    metadata value by value were most of ``commit_columns`` (issue 26)."""
    record = commit("resp_7", usage=Usage(input_tokens=5, output_tokens=2),
                    context=ContextSnapshot(estimated_input_tokens=5, context_limit=100,
                                            estimated_usage_ratio=0.05,
                                            severity=Severity.NORMAL,
                                            source=TokenSource.PROVIDER),
                    audit=audit(metadata={"sent": {"requests": 1}, "finishReason": "stop"}))
    record = attrs.evolve(record, path=(PathStep(source="validate", trigger="go", dest="cursor"),))
    called: list[str] = []

    def watch(frame: Any, event: str, _arg: Any) -> None:
        if event == "call" and "cattrs" in frame.f_code.co_filename:
            called.append(frame.f_code.co_name)

    commit_columns(record)  # warm: hooks built on first use
    sys.setprofile(watch)
    try:
        commit_columns(record)
    finally:
        sys.setprofile(None)
    assert called == []


@given(st.text())
def test_an_answers_id_gives_back_its_turns_id_and_no_other_id_does(turn_id: str) -> None:
    """``answer_turn_id`` inverts ``message_ids`` for the assistant's message (the SQLite
    window finds its turns by key with it) and answers ``None`` for the user's."""
    user, answer = message_ids(turn_id)
    assert answer_turn_id(answer) == turn_id
    assert answer_turn_id(user) is None


@given(st.floats(allow_nan=True, allow_infinity=True) | st.integers(-10, 10**12))
def test_a_lease_expiry_is_the_span_added_or_refused_each_time(seconds: float) -> None:
    """A lease length's span is kept once built: a valid one adds the same time every
    call, an invalid one is refused every call (nothing invalid is ever kept)."""
    now = datetime(2026, 12, 3, 23, 30, tzinfo=UTC)
    for _ in range(2):
        try:
            expected = now + timedelta(seconds=seconds)
        except (OverflowError, ValueError):
            expected = None
        if expected is None or not 0 < seconds < float("inf"):
            with pytest.raises(ConfigurationError):
                lease_expiry(now, seconds)
        else:
            assert lease_expiry(now, seconds) == expected


# -- the written-out texts against the trees, for values of any type (issue 26) ------------

class _Text(str):
    """A ``str`` subclass: the encoder writes its characters as a string's."""


class _Ratio(float):
    def __repr__(self) -> str:
        return "ratio"


_ODD_VALUES = [5, None, 1.5, True, 10**5000, _Text('x"y'), 'é\n"\\\x01', "\ud800", [1], {}]


def _kind(value: object) -> str:
    return type(value).__name__


def _outcome(make: Any) -> str | type[BaseException]:
    try:
        text: str = make()
    except Exception as exc:  # the kind of failure is what is compared
        return type(exc)
    return text


def _old_audit(state: AuditState) -> str | None:
    """``encode_audit`` as it was before its fields were written out: the tree encoded."""
    try:
        return utf8_safe(records._encode(encoders._audit_tree(state)))
    except records._NOT_ENCODED:
        return _converted(state)


@pytest.mark.parametrize("value", _ODD_VALUES, ids=_kind)
@pytest.mark.parametrize("field", ["provider", "model_name", "strategy", "system_prompt_hash",
                                   "toolset_hash", "cursor", "reason", "metadata"])
def test_an_audit_field_of_any_value_is_written_as_the_tree_writes_it(field: str,
                                                                       value: Any) -> None:
    state = attrs.evolve(audit(metadata={"sent": {"requests": 1}}), **{field: value})
    assert _outcome(lambda: encode_audit(state)) == _outcome(lambda: _old_audit(state))


@pytest.mark.parametrize("value", [*_ODD_VALUES, False, 2**70, datetime(2026, 1, 1)], ids=_kind)
@pytest.mark.parametrize("field", ["provider", "model_name", "system_prompt_hash",
                                   "toolset_hash", "cursor", "created_at", "covers_seq",
                                   "metadata", "schema_version"])
def test_an_envelope_field_of_any_value_is_written_as_serialize_envelope_writes_it(
        field: str, value: Any) -> None:
    state = envelope(created_at=datetime(2026, 1, 1, tzinfo=UTC), covers_seq=3)
    object.__setattr__(state, field, value)  # past the validators: what the tree meets
    old = _outcome(lambda: encoders._envelope_dict_text(state))
    assert _outcome(lambda: envelope_text(state)) == old


@pytest.mark.parametrize("value", [*_ODD_VALUES, 0.5, float("nan"), float("inf"),
                                   _Ratio(0.5), -0.0, 1e300], ids=_kind)
@pytest.mark.parametrize("field", ["estimated_input_tokens", "context_limit",
                                   "estimated_usage_ratio", "severity", "source"])
def test_a_context_field_of_any_value_is_written_as_the_tree_writes_it(field: str,
                                                                       value: Any) -> None:
    snapshot = ContextSnapshot(estimated_input_tokens=5, context_limit=100,
                               estimated_usage_ratio=0.05, severity=Severity.NORMAL,
                               source=TokenSource.PROVIDER)
    object.__setattr__(snapshot, field, value)
    old = _outcome(lambda: encoders._ascii_tree_or_converted(snapshot, encoders._context_tree,
                                                            "context snapshot"))
    assert _outcome(lambda: encode_context(snapshot)) == old


@pytest.mark.parametrize("value", _ODD_VALUES, ids=_kind)
def test_a_text_part_of_any_text_is_written_as_the_tree_writes_it(value: Any) -> None:
    part = TextPart(text="a")
    object.__setattr__(part, "text", value)
    for parts in ([part], [TextPart(text="b"), part], [part, TextPart(text="c", phase="x")]):
        old = _outcome(lambda: encode_parts(records.with_parts_recovered(parts)))  # noqa: B023
        assert _outcome(lambda: records._commit_parts(parts)) == old  # noqa: B023


def test_a_cursor_commit_s_columns_take_the_written_out_texts() -> None:
    """The audit, the envelope, the context and a text answer are written by one format
    each, not by encoding a tree (issue 26): no tree is built for them."""
    record = commit("resp_7", context=ContextSnapshot(
        estimated_input_tokens=5, context_limit=100, estimated_usage_ratio=0.05,
        severity=Severity.NORMAL, source=TokenSource.PROVIDER),
        audit=audit(metadata={"sent": {"requests": 1}}))
    built: list[str] = []

    def watch(frame: Any, event: str, _arg: Any) -> None:
        if event == "call" and frame.f_code.co_name in ("_audit_tree", "_context_tree"):
            built.append(frame.f_code.co_name)

    sys.setprofile(watch)
    try:
        columns = commit_columns(record)
    finally:
        sys.setprofile(None)
    assert built == []
    assert json.loads(columns.audit or "")["metadata"] == {"sent": {"requests": 1}}
