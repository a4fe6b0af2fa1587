"""``TurnRun.audit_metadata``: the audit's metadata set key by key on a copy of the
responses' metadata reads as the merge it replaced (issue 26, engine)."""

from __future__ import annotations

from decimal import Decimal
from types import SimpleNamespace
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from turnstate.core._conversation import OpaquePart, Part, TextPart, Usage
from turnstate.core._conversation import opaque_counts as count_opaque
from turnstate.core._cost import TurnCost
from turnstate.core._events import TurnStats
from turnstate.engine._run import TurnRun

_KEYS = st.sampled_from(["opaqueParts", "sent", "costUsd", "modelKnown", "finishReason",
                         "finishReasonRaw", "responseId", "x"])
_COST = TurnCost(input=Decimal("0.1"), cached_input=Decimal(0), cache_write=Decimal(0),
                 output=Decimal("0.2"))


def _merged(run: Any) -> dict[str, Any]:
    """The metadata as the one-expression merge built it before."""
    opaque = count_opaque(run.parts)
    sent = {"requests": run.stats.requests, "requestBytes": run.stats.request_bytes}
    cost = {"costUsd": run.stats.cost.as_json()} if run.stats.cost is not None else {}
    known = {} if run.model_info.known else {"modelKnown": False}
    finish, raw = run.finish()
    ended = {"finishReason": finish, **({"finishReasonRaw": raw} if raw else {})}
    return {**run.metadata, **({"opaqueParts": opaque} if opaque else {}), "sent": sent,
            **cost, **known, **ended}


@given(metadata=st.dictionaries(_KEYS, st.integers() | st.text(max_size=3), max_size=5),
       opaque=st.booleans(), priced=st.booleans(), known=st.booleans(),
       raw=st.none() | st.sampled_from(["", "completed"]))
def test_the_audit_metadata_is_the_merge_of_its_groups(metadata: dict[str, Any], opaque: bool,
                                                        priced: bool, known: bool,
                                                        raw: str | None) -> None:
    parts: list[Part] = [TextPart(text="a")]
    if opaque:
        parts.append(OpaquePart(provider="openai", model="m", kind="web_search_call", raw="{}"))
    run = SimpleNamespace(
        metadata=metadata, parts=parts,
        stats=TurnStats(requests=2, request_bytes=30, tool_calls=0, usage=Usage(),
                        cost=_COST if priced else None),
        model_info=SimpleNamespace(known=known), finish=lambda: ("stop", raw))
    made = TurnRun.audit_metadata(run)  # type: ignore[arg-type]
    expected = _merged(run)
    assert made == expected and list(made) == list(expected)
    assert made is not metadata and run.metadata == metadata  # the responses' own is kept
