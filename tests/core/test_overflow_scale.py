"""The scale a chat learns from the provider's refusals and counts (rule 10's pure
part): how it grows, how a measurement refines it, and the engine's bounded memory."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from tests.core.test_overflow import message
from turnstate.core._context import OverflowPolicy
from turnstate.core._conversation import Message, Role, TextPart
from turnstate.core._overflow import (
    MAX_SCALE,
    NO_CALIBRATION,
    Calibration,
    ContextCalibrations,
    fit_context,
    measured_scale,
    recalibrate,
)


def test_the_provider_s_count_sets_the_scale() -> None:
    assert recalibrate(1.0, 5_000, refused_tokens=10_000, window=8_000) == 2.0
    assert recalibrate(2.0, 5_000, refused_tokens=6_000, window=8_000) == 2.4


def test_without_figures_the_scale_at_least_doubles_and_passes_the_window() -> None:
    assert recalibrate(1.0, 5_000, refused_tokens=None, window=8_000) == 2.0
    assert math.isclose(recalibrate(1.0, 2_000, refused_tokens=None, window=8_000), 4.0005)


@given(scale=st.floats(1.0, MAX_SCALE), sent=st.integers(0, 10**7),
       refused=st.none() | st.integers(0, 10**8), window=st.integers(1, 10**7))
def test_the_scale_never_falls_after_a_refusal(scale: float, sent: int,
                                               refused: int | None, window: int) -> None:
    after = recalibrate(scale, sent, refused_tokens=refused, window=window)
    assert scale <= after <= MAX_SCALE


def test_a_measurement_refines_within_bounds() -> None:
    assert measured_scale(2.0, 4_000, 6_000) == 3.0
    assert measured_scale(2.0, 4_000, 1_000) == 1.0  # never below the plain estimate
    assert measured_scale(60.0, 100, 10_000) == MAX_SCALE
    assert measured_scale(2.0, 0, 1_000) == 2.0 and measured_scale(2.0, 10, 0) == 2.0


def test_the_memory_is_bounded_and_forgets_plain_chats() -> None:
    memory = ContextCalibrations(size=2)
    a, b, c = (("a", "p", "m"), ("b", "p", "m"), ("c", "p", "m"))
    memory.learn(a, Calibration(scale=2.0))
    memory.learn(b, Calibration(scale=3.0, window=5_000))
    memory.learn(c, Calibration(scale=4.0))  # the oldest learnt goes
    assert [memory.get(k).scale for k in (a, b, c)] == [1.0, 3.0, 4.0]
    assert memory.get(b).window == 5_000 and memory.get(("b", "p", "other")) is NO_CALIBRATION
    memory.learn(b, Calibration())
    assert b not in memory.learnt and memory.get(b) is NO_CALIBRATION


def _turns(count: int, chars: int) -> list[Message]:
    out = []
    for _ in range(count):
        for role in (Role.USER, Role.ASSISTANT):
            out.append(message(len(out) + 1, role, TextPart(text="x" * chars)))
    return out


def test_a_scale_trims_more() -> None:
    history = _turns(10, 4_000)  # 1,000 estimated tokens a message
    plain = fit_context(history, other_chars=0, context_limit=12_000,
                        policy=OverflowPolicy.TRIM)
    scaled = fit_context(history, other_chars=0, context_limit=12_000,
                         policy=OverflowPolicy.TRIM, scale=2.0)
    assert (plain.dropped, plain.estimated_tokens) == (8, 12_000)
    assert (scaled.dropped, scaled.estimated_tokens) == (14, 12_000)
