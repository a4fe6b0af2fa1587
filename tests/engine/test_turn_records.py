"""Records a cursor turn builds once, or not at all (issue 26, seventh pass): each value
made without attrs' ``__init__`` equals the attrs-built one, and each value no longer
built is checked so that the old code fails."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.engine.support import Env
from tests.helpers import count_inits
from turnstate.core import _events
from turnstate.core._citations import Citation
from turnstate.core._context import ContextSnapshot
from turnstate.core._conversation import AuditState, TextPart, Usage
from turnstate.core._cost import TurnCost
from turnstate.core._decisions import ContinuationDecision, TurnContext
from turnstate.core._events import (
    NO_STATS,
    ContextSnapshotEvent,
    TurnCompleted,
    TurnStats,
    turn_completed,
)
from turnstate.engine import _run
from turnstate.engine._run import first_facts
from turnstate.engine._step_values import Fire
from turnstate.providers._protocol import ProviderCall
from turnstate.states import PathStep
from turnstate.states._guards import TurnFacts
from turnstate.storage import _rows
from turnstate.storage._commit_columns import CommitColumns
from turnstate.storage._protocol import ChatRecord, TurnCommit, TurnLease, TurnStart
from turnstate.storage._records import format_ts as _stamp

_texts = st.text(max_size=12)
_optional_texts = st.none() | _texts
_times = st.datetimes(timezones=st.just(UTC)).map(lambda value: value.replace(fold=0))
_counts = st.integers(min_value=0, max_value=10**12)


@given(id_=_texts, owner=_texts, created=_times, updated=_times, version=_counts,
       state=_optional_texts, context=_optional_texts, active=_optional_texts,
       expires=st.none() | _times, seq=st.none() | _counts, chars=_counts,
       handed=st.booleans())
def test_a_chat_record_read_from_a_row_equals_the_attrs_built_one(
        id_: str, owner: str, created: datetime, updated: datetime, version: int,
        state: str | None, context: str | None, active: str | None,
        expires: datetime | None, seq: int | None, chars: int, handed: bool) -> None:
    """``chat_from_row`` builds the record without attrs' ``__init__``: the same value,
    with the datetimes parsed or handed over."""
    row = (id_, owner, _stamp(created), _stamp(updated), version, state, context, active,
           None if expires is None else _stamp(expires), seq, chars)
    made = (_rows.chat_from_row(row, updated, expires) if handed
            else _rows.chat_from_row(row))
    built = ChatRecord(id=id_, owner=owner, created_at=created, updated_at=updated,
                       version=version, last_provider_state=state, last_context_state=context,
                       active_turn_id=active, active_turn_expires_at=expires,
                       committed_seq=seq, history_chars=chars)
    assert type(made) is ChatRecord
    assert made == built and hash(made) == hash(built) and repr(made) == repr(built)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        made.version = 1  # type: ignore[misc]


@given(leased_chars=_counts, chars=_counts, base=_counts, seq=_counts,
       state=_optional_texts, context=_optional_texts, updated=_times)
def test_a_committed_chat_equals_the_leased_one_evolved(
        leased_chars: int, chars: int, base: int, seq: int, state: str | None,
        context: str | None, updated: datetime) -> None:
    """``committed_chat`` is what ``attrs.evolve`` of begin's record gave."""
    now = datetime(2026, 12, 4, 4, 0, tzinfo=UTC)
    leased = ChatRecord(id="c", owner="o", created_at=now, updated_at=now, version=base,
                        last_provider_state="old", last_context_state="old",
                        active_turn_id="t", active_turn_expires_at=now + timedelta(30),
                        committed_seq=seq - 1, history_chars=leased_chars)
    lease = TurnLease(chat_id="c", turn_id="t", user_message_id="t:user",
                      assistant_message_id="t:assistant", user_seq=seq - 1,
                      assistant_seq=seq, base_version=base, expires_at=now, epoch=1)
    cols = CommitColumns(parts="[]", chars=chars, audit=None, usage=None,
                         provider_state=state, context=context, strategy="cursor", path="[]")
    made = _rows.committed_chat(leased, lease, cols, chars=chars, updated_at=updated)
    evolved = attrs.evolve(
        leased, updated_at=updated, version=base + 1, last_provider_state=state,
        last_context_state=context, active_turn_id=None, active_turn_expires_at=None,
        committed_seq=seq, history_chars=leased_chars + chars)
    assert made == evolved and repr(made) == repr(evolved) and type(made) is ChatRecord


def test_a_turn_completed_event_built_without_its_init_equals_the_attrs_built_one() -> None:
    path = (PathStep(source="persist", trigger="committed", dest="done"),)
    stats = TurnStats(requests=1, usage=Usage(input_tokens=3))
    cited = Citation(kind="url_citation", url="https://example.com")
    made = turn_completed("t", "c", "cursor", None, path, "Hé", stats, "length", "max",
                          [cited])  # type: ignore[arg-type]  # the converter makes a tuple
    built = TurnCompleted(turn_id="t", chat_id="c", strategy="cursor", degradation=None,
                          path=path, text="Hé", stats=stats, finish_reason="length",
                          finish_reason_raw="max", citations=(cited,))
    assert type(made) is TurnCompleted and made.type == "turn_completed"
    assert made == built and hash(made) == hash(built) and repr(made) == repr(built)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        made.text = "x"  # type: ignore[misc]


_MADE = (ChatRecord, TurnCompleted, TurnFacts, TurnStats, Usage, ContinuationDecision,
         ContextSnapshot, ContextSnapshotEvent, AuditState, TurnLease, CommitColumns, Fire,
         TurnStart, TurnCommit, TurnContext, TurnCost, TextPart, ProviderCall)


async def test_a_cursor_turn_builds_its_records_without_attrs_init(
        env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    """A cursor turn on a ``MemoryStore`` builds none of these through attrs'
    ``__init__`` but the parser's answer part and usage: its chat records, decision,
    snapshot and its event, audit, stats, lease, commit columns, triggers, last event,
    start, context, request, cost and commit are made by ``slot_maker`` or shared, with
    no zero ``TurnStats`` to start from nor a sum of the response's usage with zero (main
    built them all through ``__init__``: 27 a cursor turn over the OpenAI Responses
    parser, 3 of them the provider code's, which still does)."""
    await env.turn("first")
    built = count_inits(monkeypatch, _MADE)
    outcome = await env.turn("second")
    assert outcome.final.strategy == "cursor" and outcome.committed
    assert built == ["TextPart", "Usage"], built  # the parser's: the answer, its usage


def test_turns_that_start_alike_share_their_first_facts() -> None:
    """Frozen, so shared; a limit that is not an int is kept as given."""
    assert first_facts(True, False, 8) is first_facts(True, False, 8)
    assert first_facts(True, False, 8) == TurnFacts(durable=True, iteration_limit=8)
    assert first_facts(True, True, 3) == TurnFacts(durable=True, recover_tool_results=True,
                                                   iteration_limit=3)
    odd = first_facts(False, False, 8.0)  # type: ignore[arg-type]
    assert type(odd.iteration_limit) is float
    assert first_facts(True, False, 8).iteration_limit.__class__ is int


def test_a_turn_starts_from_the_shared_zero_stats() -> None:
    assert TurnStats() == NO_STATS and NO_STATS.usage == Usage()
    assert _run._NO_USAGE is NO_STATS.usage and _events.NO_STATS is NO_STATS
