"""Fitting a replay into the context window: abort or trim whole turns."""

from __future__ import annotations

from datetime import UTC, datetime

from turnstate.core import OverflowPolicy
from turnstate.core._conversation import (
    Message,
    MessageStatus,
    Role,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)
from turnstate.core._overflow import fit_context, turn_starts

AT = datetime(2026, 12, 3, tzinfo=UTC)


def message(seq: int, role: Role, *parts: object) -> Message:
    return Message(id=f"m{seq}", chat_id="c", seq=seq, role=role, status=MessageStatus.COMPLETED,
                   parts=parts, created_at=AT, updated_at=AT)  # type: ignore[arg-type]


def history() -> list[Message]:
    out: list[Message] = []
    for turn in range(6):
        out.append(message(len(out) + 1, Role.USER, TextPart(text="q" * 400)))
        out.append(message(len(out) + 1, Role.ASSISTANT,
                           ToolCallPart(call_id=f"c{turn}", name="w", arguments="{}"),
                           ToolResultPart(call_id=f"c{turn}", name="w", output="r" * 400),
                           TextPart(text="a" * 400)))
    return out


def test_a_fitting_history_is_left_alone_and_an_overflow_names_its_figures() -> None:
    fit = fit_context(history(), other_chars=100, context_limit=100_000,
                      policy=OverflowPolicy.TRIM)
    assert fit.fits and fit.dropped == 0
    over = fit_context(history(), other_chars=100, context_limit=500,
                       policy=OverflowPolicy.ABORT)
    assert not over.fits and over.dropped == 0
    assert "1,830 input tokens" in over.detail() and "limit of 500" in over.detail()


def test_trimming_drops_only_whole_turns_for_every_limit() -> None:
    messages = history()
    starts = set(turn_starts(messages)) | {len(messages)}
    for limit in range(50, 2000, 37):
        fit = fit_context(messages, other_chars=100, context_limit=limit,
                          policy=OverflowPolicy.TRIM)
        assert fit.dropped in starts, limit  # a call is never cut from its result
        if fit.fits and fit.dropped:
            bigger = fit_context(messages, other_chars=100, context_limit=limit,
                                 policy=OverflowPolicy.ABORT)
            assert not bigger.fits
        kept = messages[fit.dropped:]
        assert not kept or kept[0].role == Role.USER


def test_when_even_the_turn_alone_does_not_fit_everything_is_dropped_and_it_aborts() -> None:
    fit = fit_context(history(), other_chars=10_000, context_limit=1000,
                      policy=OverflowPolicy.TRIM)
    assert not fit.fits and fit.dropped == len(history())
