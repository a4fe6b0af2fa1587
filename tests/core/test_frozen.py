"""``slot_maker``: frozen records without attrs' ``__init__``, equal to the attrs-built
ones, and refused for any class whose ``__init__`` does more than set its slots."""

from __future__ import annotations

import dis
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import attrs
import pytest

from turnstate.core._context import ContextSettings, ContextSnapshot, Severity, TokenSource
from turnstate.core._conversation import AuditState, TextPart, Usage
from turnstate.core._cost import CachePolicy, TurnCost
from turnstate.core._decisions import (
    ContinuationDecision,
    DegradationReason,
    Strategy,
    TurnContext,
)
from turnstate.core._events import ContextSnapshotEvent, TurnStats
from turnstate.core._frozen import slot_maker
from turnstate.core._generation import NO_SETTINGS
from turnstate.core._registry import DEFAULT_REGISTRY
from turnstate.engine._step_values import Fire
from turnstate.providers._protocol import ProviderCall
from turnstate.states import PathStep
from turnstate.states._table import Trigger
from turnstate.storage._commit_columns import CommitColumns
from turnstate.storage._expected import CutExpected
from turnstate.storage._protocol import ChatRecord, TurnCommit, TurnLease, TurnStart

NOW = datetime(2026, 12, 4, 4, 30, tzinfo=UTC)
_SNAPSHOT = ContextSnapshot(estimated_input_tokens=10, context_limit=100,
                            estimated_usage_ratio=0.1, severity=Severity.NORMAL,
                            source=TokenSource.PROVIDER)
_RECORDS: list[tuple[type, dict[str, Any]]] = [
    (ContinuationDecision, {"strategy": Strategy.REPLAY,
                            "reason": DegradationReason.MODEL_CHANGED, "envelope": None}),
    (ContextSnapshot, attrs.asdict(_SNAPSHOT, recurse=False)),
    (ContextSnapshotEvent, {"snapshot": _SNAPSHOT}),
    (AuditState, {"provider": "openai", "model_name": "gpt-4o", "strategy": "cursor",
                  "system_prompt_hash": "p", "toolset_hash": "t", "cursor": "resp_1",
                  "reason": None, "metadata": {"sent": {"requests": 1}}}),
    (TurnStats, {"requests": 2, "request_bytes": 300, "tool_calls": 1,
                 "usage": Usage(input_tokens=5),
                 "cost": TurnCost(input=Decimal("0.1"), cached_input=Decimal(0),
                                  cache_write=Decimal(0), output=Decimal("0.2")), "retries": 1}),
    (TurnLease, {"chat_id": "c", "turn_id": "t", "user_message_id": "t:user",
                 "assistant_message_id": "t:assistant", "user_seq": 3, "assistant_seq": 4,
                 "base_version": 2, "expires_at": NOW, "epoch": 7, "user_chars": 12,
                 "chat": None}),
    (CommitColumns, {"parts": "[]", "chars": 0, "audit": None, "usage": None,
                     "provider_state": "{}", "context": None, "strategy": "replay",
                     "path": "[]"}),
    (Fire, {"trigger": Trigger.COMMITTED, "reason": None}),
    (TurnStart, {"turn_id": "t", "user_parts": [TextPart(text="hi")], "provider": "openai",
                 "model": "gpt-4o", "lease_seconds": 30.0, "replace_from": 3,
                 "attached": True, "client_key": "k",
                 "expect": CutExpected(key_holder="t0", key_checked=True)}),
    (TurnCommit, {"parts": [TextPart(text="a")], "provider_state": None, "audit": None,
                  "usage": Usage(), "context": _SNAPSHOT, "strategy": "cursor",
                  "path": [PathStep(source="persist", trigger="committed", dest="done")]}),
    (TurnContext, {"provider": "openai", "model_name": "gpt-4o", "system_prompt_hash": "p",
                   "toolset_hash": "t", "committed_seq": 3, "now": NOW,
                   "context_critical": True, "provider_compaction": False}),
    (TurnCost, {"input": Decimal("0.1"), "cached_input": Decimal("0.00"),
                "cache_write": Decimal(0), "output": Decimal("0.2")}),
    (TextPart, {"text": "hé", "phase": None, "citations": ()}),
    (ProviderCall, {"strategy": Strategy.CURSOR,
                    "model": DEFAULT_REGISTRY.model("openai", "gpt-4o"),
                    "system_prompt": "s", "tools": [], "settings": ContextSettings(),
                    "generation": NO_SETTINGS, "history": [], "user_text": "hi",
                    "user_parts": [], "cursor": "resp_1", "tool_results": [],
                    "loop_messages": [], "iteration": 0, "turn_parts": [],
                    "cache": CachePolicy.AUTO, "cache_key": "ts-k"}),
    (ChatRecord, {"id": "c", "owner": "o", "created_at": NOW, "updated_at": NOW,
                  "version": 1, "last_provider_state": None, "last_context_state": "{}",
                  "active_turn_id": None, "active_turn_expires_at": None,
                  "committed_seq": 4, "history_chars": 40}),
]


@pytest.mark.parametrize(("cls", "fields"), _RECORDS,
                         ids=[cls.__name__ for cls, _ in _RECORDS])
def test_a_made_record_equals_the_attrs_built_one(cls: type, fields: dict[str, Any]) -> None:
    given = {name: value for name, value in fields.items()
             if attrs.fields_dict(cls)[name].init}
    made, built = slot_maker(cls)(*given.values()), cls(**given)
    assert type(made) is cls
    assert made == built and _hash(made) == _hash(built) and repr(made) == repr(built)
    assert attrs.asdict(made, recurse=False) == attrs.asdict(built, recurse=False)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        setattr(made, next(iter(given)), None)


def _hash(value: object) -> object:
    try:
        return hash(value)
    except TypeError:  # a dict inside (an audit's metadata): unhashable either way
        return TypeError


def test_a_field_init_does_not_take_gets_its_default() -> None:
    made = slot_maker(ContextSnapshotEvent)(_SNAPSHOT)
    assert made.type == "context_snapshot" == ContextSnapshotEvent(snapshot=_SNAPSHOT).type


@attrs.frozen
class _Converted:
    value: tuple[int, ...] = attrs.field(converter=tuple)
    tag: str = attrs.field(default="converted", init=False)


def _positive(_: object, field: attrs.Attribute[int], value: int) -> None:
    if value <= 0:
        msg = f"{field.name} must be positive"
        raise ValueError(msg)


@attrs.frozen
class _Validated:
    count: int = attrs.field(validator=_positive)
    name: str = attrs.field(validator=attrs.validators.instance_of(str))


def test_a_maker_applies_converters_as_init_does() -> None:
    made = slot_maker(_Converted)([1, 2])
    assert made == _Converted([1, 2]) and made.value == (1, 2) and made.tag == "converted"


def test_a_maker_runs_validators_as_init_does() -> None:
    make = slot_maker(_Validated)
    assert make(2, "x") == _Validated(2, "x")
    with pytest.raises(ValueError, match="count must be positive"):
        make(0, "x")
    with pytest.raises(TypeError):
        make(1, 2)
    with attrs.validators.disabled():
        assert make(0, 2).count == 0 == _Validated(0, 2).count  # type: ignore[arg-type]


def test_a_maker_sets_each_slot_by_a_store_not_a_call() -> None:
    """A slot's descriptor ``__set__``, called once per field, was a call through a
    method wrapper each (issue 26): the maker now stores into the slots of an unfrozen
    subclass that adds none and then makes the object a ``cls``, so a record without
    converters or validators costs one call, its ``object.__new__``."""
    make = slot_maker(AuditState)  # eight fields, no converter, no validator
    calls = [op for op in dis.get_instructions(make) if op.opname.startswith("CALL")]
    assert len(calls) == 1
    made = make("openai", "gpt-4o", "cursor", "p", "t", None, None, None)
    assert type(made) is AuditState and made.__class__ is AuditState
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        made.cursor = "x"  # type: ignore[misc]
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        del made.cursor  # type: ignore[misc]


def test_a_maker_s_validators_see_a_record_of_the_class() -> None:
    """The object is a ``cls`` before any validator runs (it was made as the unfrozen
    subclass)."""
    seen: list[type] = []

    @attrs.frozen
    class _Seen:
        value: int = attrs.field(validator=lambda made, _field, _value: seen.append(
            type(made)))

    slot_maker(_Seen)(1)
    assert seen == [_Seen]


def test_a_turn_context_s_maker_refuses_a_naive_time() -> None:
    from turnstate.core._errors import ConfigurationError
    from turnstate.engine._turn_input import _context

    with pytest.raises(ConfigurationError):
        _context("openai", "m", "p", "t", None, datetime(2026, 1, 1), False, True)


@attrs.frozen
class _PostInit:
    value: int

    def __attrs_post_init__(self) -> None:
        pass


@attrs.frozen
class _Made:
    value: list[int] = attrs.field(factory=list, init=False)


@attrs.define(slots=False, frozen=True)
class _Dict:
    value: int


@attrs.frozen
class _TakesSelf:
    value: int = attrs.field(converter=attrs.Converter(lambda v, _: v, takes_self=True))


@pytest.mark.parametrize("cls", [_PostInit, _Made, _Dict, _TakesSelf])
def test_a_class_whose_init_does_more_has_no_maker(cls: type) -> None:
    with pytest.raises(TypeError, match="no slot maker"):
        slot_maker(cls)


@attrs.frozen(cache_hash=True)
class _CachedHash:
    value: int


@attrs.frozen
class _OwnInit:
    value: int

    def __init__(self, value: int) -> None:
        self.__attrs_init__(value * 2)  # type: ignore[attr-defined]


@pytest.mark.parametrize("cls", [_CachedHash, _OwnInit])
def test_a_class_whose_init_sets_more_or_other_than_its_fields_has_no_maker(
        cls: type) -> None:
    """Review: a hash-cached class's maker left the cache slot unset (``hash`` raised
    AttributeError) and an ``__init__`` of the class's own was skipped (another value)."""
    with pytest.raises(TypeError, match="no slot maker"):
        slot_maker(cls)


@attrs.frozen
class _ConvertedDefault:
    value: int
    tag: str = attrs.field(default="plain", init=False, converter=str.upper)


def test_a_field_init_does_not_take_gets_its_default_converted_as_init_does() -> None:
    """Review: attrs' ``__init__`` converts an ``init=False`` field's default; the maker
    set it unconverted (``'plain'`` against ``'PLAIN'``)."""
    assert slot_maker(_ConvertedDefault)(1) == _ConvertedDefault(1)
    assert slot_maker(_ConvertedDefault)(1).tag == "PLAIN"
