"""Deciding the continuation, and what of a turn's state may be stored."""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import attrs
import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from tests.strategies import (
    PROVIDER_NAMES,
    envelope_mapping,
    envelopes,
    json_objects,
    loop_envelopes,
    small_names,
    turn_contexts,
)
from turnstate.core import (
    DEFAULT_REGISTRY,
    ConfigurationError,
    ContinuationDecision,
    ContinuationEnvelope,
    DegradationReason,
    Mode,
    Registry,
    Strategy,
    TurnContext,
    decide_continuation,
    decide_turn_persistence,
    parse_envelope,
    serialize_envelope,
    system_prompt_hash,
    toolset_hash,
)
from turnstate.core._convert import format_utc

R = DegradationReason
NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
SYSTEM = system_prompt_hash("Be terse.")
TOOLS = toolset_hash([{"name": "get_weather", "description": "", "parameters": {}}])
THIRTY_DAYS = timedelta(days=30)
TICK = timedelta(microseconds=1)
DROP = object()


def ctx(**changes: Any) -> TurnContext:
    """The turn about to run: OpenAI, gpt-4o, four committed messages, at NOW."""
    base = TurnContext(provider="openai", model_name="gpt-4o", system_prompt_hash=SYSTEM,
                       toolset_hash=TOOLS, committed_seq=4, now=NOW)
    return attrs.evolve(base, **changes)


def stored(**changes: Any) -> dict[str, Any]:
    """A stored envelope that matches ``ctx()`` exactly; ``DROP`` removes a key."""
    data: dict[str, Any] = {
        "schemaVersion": 1, "provider": "openai", "mode": "responses", "modelName": "gpt-4o",
        "systemPromptHash": SYSTEM, "toolsetHash": TOOLS, "cursor": "resp_abc123",
        "createdAt": format_utc(NOW - timedelta(days=1)), "coversSeq": 4,
    }
    data.update(changes)
    return {k: v for k, v in data.items() if v is not DROP}


def age(delta: timedelta) -> str:
    return format_utc(NOW - delta)


GEMINI = {"provider": "gemini", "mode": "interactions", "cursor": "v1_abc"}

# (id, stored changes or None for no stored value, context changes, strategy, reason)
TABLE: list[tuple[str, dict[str, Any] | None, dict[str, Any], Strategy, R | None]] = [
    ("fresh cursor", {}, {}, Strategy.CURSOR, None),
    ("nothing stored, durable", None, {}, Strategy.REPLAY, None),
    ("nothing stored, stateless", None, {"provider": "anthropic"}, Strategy.LOCAL_LOOP, None),
    ("gemini fresh cursor", GEMINI, {"provider": "gemini"}, Strategy.CURSOR, None),
    ("wrong type", {"modelName": 4}, {}, Strategy.REPLAY, R.ENVELOPE_MALFORMED),
    ("unknown schema version", {"schemaVersion": 2}, {}, Strategy.REPLAY, R.ENVELOPE_MALFORMED),
    ("mode the provider never issues", {"mode": "interactions"}, {}, Strategy.REPLAY,
     R.ENVELOPE_MALFORMED),
    ("stored stateless-loop state", {"mode": "stateless-loop", "cursor": DROP}, {},
     Strategy.REPLAY, R.ENVELOPE_MALFORMED),
    ("stored loop state, stateless provider",
     {"provider": "anthropic", "mode": "stateless-loop", "cursor": DROP,
      "loopMessages": [{"role": "user", "content": "hi"}]},
     {"provider": "anthropic"}, Strategy.LOCAL_LOOP, R.ENVELOPE_MALFORMED),
    ("provider changed", GEMINI, {}, Strategy.REPLAY, R.PROVIDER_CHANGED),
    ("unknown stored provider", {"provider": "mystery"}, {}, Strategy.REPLAY,
     R.PROVIDER_CHANGED),
    ("durable envelope, stateless provider", {}, {"provider": "anthropic"},
     Strategy.LOCAL_LOOP, R.PROVIDER_CHANGED),
    ("durable envelope, deepseek", {}, {"provider": "deepseek"}, Strategy.LOCAL_LOOP,
     R.PROVIDER_CHANGED),
    ("durable envelope, openai-compatible", GEMINI, {"provider": "openai-compatible"},
     Strategy.LOCAL_LOOP, R.PROVIDER_CHANGED),
    ("model changed", {"modelName": "gpt-4.1"}, {}, Strategy.REPLAY, R.MODEL_CHANGED),
    ("system prompt changed", {"systemPromptHash": system_prompt_hash("Be verbose.")}, {},
     Strategy.REPLAY, R.SYSTEM_PROMPT_CHANGED),
    ("toolset changed", {"toolsetHash": toolset_hash([])}, {}, Strategy.REPLAY,
     R.TOOLSET_CHANGED),
    ("empty cursor", {"cursor": ""}, {}, Strategy.REPLAY, R.CURSOR_INVALID),
    ("blank cursor", {"cursor": " \t\n"}, {}, Strategy.REPLAY, R.CURSOR_INVALID),
    ("cursor covers fewer messages", {"coversSeq": 3}, {}, Strategy.REPLAY, R.CURSOR_INVALID),
    ("cursor covers more messages", {"coversSeq": 5}, {}, Strategy.REPLAY, R.CURSOR_INVALID),
    ("cursor over history now empty", {}, {"committed_seq": None}, Strategy.REPLAY,
     R.CURSOR_INVALID),
    ("no coversSeq: not compared", {"coversSeq": DROP}, {"committed_seq": 99},
     Strategy.CURSOR, None),
    ("exactly 30 days old", {"createdAt": age(THIRTY_DAYS)}, {}, Strategy.CURSOR, None),
    ("30 days and a microsecond old", {"createdAt": age(THIRTY_DAYS + TICK)}, {},
     Strategy.REPLAY, R.CURSOR_EXPIRED),
    ("a year old", {"createdAt": age(timedelta(days=365))}, {}, Strategy.REPLAY,
     R.CURSOR_EXPIRED),
    ("issued in the future (clock skew)", {"createdAt": age(-timedelta(hours=1))}, {},
     Strategy.CURSOR, None),
    ("no createdAt: never expires", {"createdAt": DROP}, {}, Strategy.CURSOR, None),
    ("no clock: expiry not checked", {"createdAt": age(timedelta(days=365))}, {"now": None},
     Strategy.CURSOR, None),
    ("gemini 55 days is fine", {**GEMINI, "createdAt": age(timedelta(days=55))},
     {"provider": "gemini"}, Strategy.CURSOR, None),
    ("gemini past 55 days", {**GEMINI, "createdAt": age(timedelta(days=55) + TICK)},
     {"provider": "gemini"}, Strategy.REPLAY, R.CURSOR_EXPIRED),
    # Precedence: when several fields differ, the first check in DESIGN.md's order wins.
    ("malformed beats provider", {**GEMINI, "schemaVersion": 9}, {}, Strategy.REPLAY,
     R.ENVELOPE_MALFORMED),
    ("provider beats model", {**GEMINI, "modelName": "x"}, {}, Strategy.REPLAY,
     R.PROVIDER_CHANGED),
    ("model beats system prompt", {"modelName": "x", "systemPromptHash": "y"}, {},
     Strategy.REPLAY, R.MODEL_CHANGED),
    ("system prompt beats toolset", {"systemPromptHash": "y", "toolsetHash": "z"}, {},
     Strategy.REPLAY, R.SYSTEM_PROMPT_CHANGED),
    ("toolset beats cursor", {"toolsetHash": "z", "cursor": ""}, {}, Strategy.REPLAY,
     R.TOOLSET_CHANGED),
    ("invalid beats expired", {"cursor": " ", "createdAt": age(timedelta(days=90))}, {},
     Strategy.REPLAY, R.CURSOR_INVALID),
    ("sequence beats expired", {"coversSeq": 1, "createdAt": age(timedelta(days=90))}, {},
     Strategy.REPLAY, R.CURSOR_INVALID),
    # A critical last snapshot: the cursor's conversation fills the window. Gemini never
    # compacts it; OpenAI does when the turn asks (the default), not when it does not.
    ("gemini critical snapshot", GEMINI, {"provider": "gemini", "context_critical": True},
     Strategy.REPLAY, R.CONTEXT_OVERFLOW),
    ("openai critical, compaction off", {},
     {"context_critical": True, "provider_compaction": False}, Strategy.REPLAY,
     R.CONTEXT_OVERFLOW),
    ("openai critical, compaction on", {}, {"context_critical": True}, Strategy.CURSOR, None),
    ("gemini not critical", GEMINI, {"provider": "gemini", "provider_compaction": False},
     Strategy.CURSOR, None),
    ("expired beats overflow", {"createdAt": age(timedelta(days=90))},
     {"context_critical": True, "provider_compaction": False}, Strategy.REPLAY,
     R.CURSOR_EXPIRED),
]


def _forms(value: dict[str, Any]) -> dict[str, object]:
    text = json.dumps(value)
    return {"mapping": value, "text": text, "bytes": text.encode(), "bytearray":
            bytearray(text.encode())}


Row = tuple[str, dict[str, Any] | None, dict[str, Any], Strategy, R | None]


@pytest.mark.parametrize("form", ["mapping", "text", "bytes", "bytearray"])
@pytest.mark.parametrize("row", TABLE, ids=[row[0] for row in TABLE])
def test_decision_table(row: Row, form: str) -> None:
    """Each row gives its strategy and reason, whatever form the stored value has."""
    case, changes, context, strategy, reason = row
    raw = None if changes is None else _forms(stored(**changes))[form]
    decision = decide_continuation(raw, ctx(**context))
    assert (decision.strategy, decision.reason) == (strategy, reason), case
    assert decision.rejected_stored_state is (reason is not None)


def test_table_covers_every_reason_and_strategy() -> None:
    """The table exercises every DegradationReason and every Strategy."""
    assert {row[4] for row in TABLE} == {*DegradationReason, None}
    assert {row[3] for row in TABLE} == set(Strategy)
    assert {r.value for r in DegradationReason} == {
        "provider_changed", "model_changed", "system_prompt_changed", "toolset_changed",
        "cursor_expired", "cursor_invalid", "envelope_malformed", "context_overflow"}


# One fault per check, in DESIGN.md's order; each makes exactly its own check fail. A
# fault changes the stored value or the turn's context (a critical last snapshot with
# compaction off).
Fault = Callable[[dict[str, Any], dict[str, Any]], None]
FAULTS: list[tuple[R, Fault]] = [
    (R.ENVELOPE_MALFORMED, lambda s, c: s.update(schemaVersion="1")),
    (R.PROVIDER_CHANGED, lambda s, c: s.update(GEMINI)),
    (R.MODEL_CHANGED, lambda s, c: s.update(modelName="gpt-4.1")),
    (R.SYSTEM_PROMPT_CHANGED, lambda s, c: s.update(systemPromptHash="other")),
    (R.TOOLSET_CHANGED, lambda s, c: s.update(toolsetHash="other")),
    (R.CURSOR_INVALID, lambda s, c: s.update(cursor="  ")),
    (R.CURSOR_INVALID, lambda s, c: s.update(coversSeq=2)),
    (R.CURSOR_EXPIRED, lambda s, c: s.update(createdAt=age(THIRTY_DAYS + TICK))),
    (R.CONTEXT_OVERFLOW, lambda s, c: c.update(context_critical=True,
                                               provider_compaction=False)),
]
ORDER = [R.ENVELOPE_MALFORMED, R.PROVIDER_CHANGED, R.MODEL_CHANGED, R.SYSTEM_PROMPT_CHANGED,
         R.TOOLSET_CHANGED, R.CURSOR_INVALID, R.CURSOR_EXPIRED, R.CONTEXT_OVERFLOW]


def test_precedence_over_every_combination_of_faults() -> None:
    """For every non-empty set of faults (511 combinations), the reason is the earliest one
    in the documented order, and the strategy is replay."""
    seen = set()
    for size in range(1, len(FAULTS) + 1):
        for combo in itertools.combinations(FAULTS, size):
            value, context = stored(), {}
            for _, fault in combo:
                fault(value, context)
            expected = min((reason for reason, _ in combo), key=ORDER.index)
            decision = decide_continuation(value, ctx(**context))
            assert decision.reason is expected, [reason for reason, _ in combo]
            assert decision.strategy is Strategy.REPLAY
            seen.add(expected)
    assert seen == set(DegradationReason)


def test_rejected_envelope_is_returned_for_logs_and_unreadable_one_is_not() -> None:
    """A readable but rejected envelope comes back with the decision; an unreadable one not."""
    value = stored(modelName="gpt-4.1")
    decision = decide_continuation(value, ctx())
    assert decision.envelope == parse_envelope(value)
    assert decide_continuation("{not json", ctx()).envelope is None
    fresh = decide_continuation(stored(), ctx())
    assert fresh == ContinuationDecision(strategy=Strategy.CURSOR, envelope=parse_envelope(
        stored()))
    assert decide_continuation(None, ctx()) == ContinuationDecision(strategy=Strategy.REPLAY)


@pytest.mark.parametrize("raw", ["", "null", "garbage", b"\xff\xfe", "[]", 42, ["x"]])
def test_unreadable_stored_values_are_envelope_malformed(raw: object) -> None:
    """Anything stored that is not an envelope degrades with envelope_malformed."""
    for provider, strategy in (("openai", Strategy.REPLAY), ("anthropic", Strategy.LOCAL_LOOP)):
        decision = decide_continuation(raw, ctx(provider=provider))
        assert (decision.strategy, decision.reason) == (strategy, R.ENVELOPE_MALFORMED)


@pytest.mark.parametrize("provider", ["", "mystery", "OpenAI", "openai "])
@pytest.mark.parametrize("raw", [None, "garbage"], ids=["nothing stored", "garbage stored"])
def test_unknown_context_provider_is_a_configuration_error(provider: str, raw: object) -> None:
    """A turn for a provider the registry does not know is refused, stored value or not."""
    with pytest.raises(ConfigurationError, match="unknown provider"):
        decide_continuation(raw, ctx(provider=provider))


def test_naive_now_is_a_configuration_error() -> None:
    """A naive ``now`` cannot be compared with ``createdAt`` and is refused at once."""
    with pytest.raises(ConfigurationError, match="aware"):
        ctx(now=datetime(2026, 12, 1, 12))


@pytest.mark.parametrize(
    ("retention", "issued", "reason"),
    [
        (timedelta(hours=1), timedelta(hours=1), None),
        (timedelta(hours=1), timedelta(hours=1) + TICK, R.CURSOR_EXPIRED),
        (timedelta(days=90), timedelta(days=60), None),
        (timedelta(days=90), timedelta(days=90) + TICK, R.CURSOR_EXPIRED),
        (None, timedelta(days=3650), None),
    ],
)
def test_retention_is_configurable_per_provider(
    retention: timedelta | None, issued: timedelta, reason: R | None
) -> None:
    """``Registry.with_retention`` moves the expiry boundary; None means never expires."""
    registry = DEFAULT_REGISTRY.with_retention("openai", retention)
    decision = decide_continuation(stored(createdAt=age(issued)), ctx(), registry)
    assert decision.reason is reason
    assert decision.strategy is (Strategy.CURSOR if reason is None else Strategy.REPLAY)


def test_retention_of_one_provider_does_not_touch_another() -> None:
    """Shortening OpenAI's retention leaves Gemini's cursors alive."""
    registry = DEFAULT_REGISTRY.with_retention("openai", timedelta(seconds=1))
    gemini = stored(**GEMINI, createdAt=age(timedelta(days=2)))
    assert decide_continuation(gemini, ctx(provider="gemini"), registry).reason is None
    assert decide_continuation(stored(), ctx(), registry).reason is R.CURSOR_EXPIRED


# ----------------------------------------------------------------- reference-model property

_small_seqs = st.none() | st.integers(0, 2)
_times = st.none() | st.sampled_from(
    [NOW - THIRTY_DAYS - TICK, NOW - THIRTY_DAYS, NOW - timedelta(days=55) - TICK, NOW])
_matching_envelopes = envelopes(
    providers=st.sampled_from((*PROVIDER_NAMES, "mystery")), models=small_names,
    hashes=small_names, cursor=st.sampled_from(("resp_1", "", " ")), created_at=_times,
    covers_seq=_small_seqs, metadata=st.none(), loop_messages=st.none(),
)
_matching_contexts = turn_contexts(models=small_names, hashes=small_names,
                                   committed_seqs=_small_seqs,
                                   nows=st.none() | st.just(NOW))


def reference_decision(envelope: ContinuationEnvelope | None, context: TurnContext,
                       registry: Registry) -> tuple[Strategy, R | None]:
    """DESIGN.md section 3, written out once more, independently of the implementation."""
    capability = registry.providers[context.provider]
    fallback = Strategy.REPLAY if capability.mode.durable else Strategy.LOCAL_LOOP
    if envelope is None:
        return fallback, None
    issuer = registry.providers.get(envelope.provider)
    if envelope.mode is Mode.STATELESS_LOOP or (issuer and issuer.mode is not envelope.mode):
        return fallback, R.ENVELOPE_MALFORMED
    checks = [
        (envelope.provider != context.provider, R.PROVIDER_CHANGED),
        (envelope.model_name != context.model_name, R.MODEL_CHANGED),
        (envelope.system_prompt_hash != context.system_prompt_hash, R.SYSTEM_PROMPT_CHANGED),
        (envelope.toolset_hash != context.toolset_hash, R.TOOLSET_CHANGED),
        (not (envelope.cursor or "").strip(), R.CURSOR_INVALID),
        (envelope.covers_seq is not None and envelope.covers_seq != context.committed_seq,
         R.CURSOR_INVALID),
        (capability.retention is not None and envelope.created_at is not None
         and context.now is not None
         and context.now - envelope.created_at > capability.retention, R.CURSOR_EXPIRED),
    ]
    reason = next((reason for failed, reason in checks if failed), None)
    return (fallback, reason) if reason else (Strategy.CURSOR, None)


@given(st.none() | _matching_envelopes, _matching_contexts)
def test_decision_agrees_with_the_reference_model(
    envelope: ContinuationEnvelope | None, context: TurnContext
) -> None:
    """For envelopes and contexts that often match, the decision is the reference model's,
    from a mapping, text or bytes alike."""
    expected = reference_decision(envelope, context, DEFAULT_REGISTRY)
    event(f"{expected[0]} / {expected[1]}")
    raws: list[object] = [None] if envelope is None else [
        envelope_mapping(envelope), serialize_envelope(envelope),
        serialize_envelope(envelope).encode()]
    for raw in raws:
        decision = decide_continuation(raw, context)
        assert (decision.strategy, decision.reason) == expected
        assert decision.envelope == envelope


# Metadata plays no part in these decisions; leaving it out keeps the properties fast.
_plain_envelopes = envelopes(metadata=st.none())


@given(_plain_envelopes, turn_contexts())
def test_decision_never_fails_for_any_envelope_and_context(
    envelope: ContinuationEnvelope, context: TurnContext
) -> None:
    """Any stored envelope against any known provider's turn yields a decision: a cursor only
    for a durable provider with the same name."""
    decision = decide_continuation(serialize_envelope(envelope), context)
    event(f"{decision.strategy} / {decision.reason}")
    if decision.strategy is Strategy.CURSOR:
        assert DEFAULT_REGISTRY.provider(context.provider).durable
        assert envelope.provider == context.provider and envelope.mode.durable


# ------------------------------------------------------------------ decide_turn_persistence


def durable(**changes: Any) -> ContinuationEnvelope:
    return attrs.evolve(parse_envelope(stored()), **changes)


def test_persistence_of_nothing_is_nothing() -> None:
    """No provider state: nothing to store."""
    assert decide_turn_persistence(None) is None


@pytest.mark.parametrize("cursor", [None, "", " ", "\t\n "])
def test_durable_state_without_a_cursor_is_not_stored(cursor: str | None) -> None:
    """A durable state whose cursor is missing, empty or blank is never stored."""
    assert decide_turn_persistence(durable(cursor=cursor)) is None


def test_durable_state_is_stored_without_loop_messages() -> None:
    """A durable state with a cursor is stored as it is, minus any loop messages."""
    state = durable(loop_messages=({"role": "tool", "content": "42"},))
    assert decide_turn_persistence(state) == durable()
    assert decide_turn_persistence(durable()) == durable()


@given(loop_envelopes(metadata=st.none()))
def test_stateless_loop_states_are_never_stored(state: ContinuationEnvelope) -> None:
    """Every stateless-loop state, with or without loop messages or a cursor, gives None."""
    event("with loop messages" if state.loop_messages is not None else "no loop messages")
    assert decide_turn_persistence(state) is None
    assert decide_turn_persistence(attrs.evolve(state, cursor="resp_1")) is None


_any_loop = st.none() | st.lists(json_objects(3, max_size=2), max_size=2).map(tuple)


@given(_plain_envelopes, _any_loop)
def test_no_persisted_state_ever_carries_loop_messages(
    state: ContinuationEnvelope, loop: tuple[dict[str, Any], ...] | None
) -> None:
    """Whatever the turn ends with, the stored state has no loop messages, and it is stored
    exactly when it is durable with a non-blank cursor."""
    state = attrs.evolve(state, loop_messages=loop)
    result = decide_turn_persistence(state)
    storable = state.mode.durable and bool((state.cursor or "").strip())
    event("stored" if result is not None else "not stored")
    if result is None:
        assert not storable
        return
    assert storable
    assert result.loop_messages is None
    assert result == attrs.evolve(state, loop_messages=None)
