"""A context window learnt from a provider's refusal is believed within bounds
(deadline10): not below ``MIN_LEARNT_WINDOW``, not above the registry's window, replaced
by the provider's next word and forgotten ``WINDOW_SECONDS`` after it was learnt.

Before, a refusal whose message said the window was 1 token (a misread message, a
proxy's garbage) was kept for the process: every later replay of the chat aborted
``context_overflow`` before sending anything.
"""

from __future__ import annotations

import pytest

from tests.engine.support import Env
from turnstate.core._overflow import (
    MIN_LEARNT_WINDOW,
    WINDOW_SECONDS,
    Calibration,
    ContextCalibrations,
    sane_window,
)
from turnstate.emulators._scripted import ScriptStep

ABSURD = ("This model's maximum context length is 1 tokens. However, your messages "
          "resulted in 50000 tokens. Please reduce the length of the messages.")
KEY = ("chat", "openai", "gpt-4o")


async def test_an_absurd_window_in_a_refusal_does_not_kill_the_chat(env: Env) -> None:
    env.backend.push("anthropic", ScriptStep.fail(400, "context_length_exceeded",
                                                  message=ABSURD))
    first = await env.turn("a", provider="anthropic", model="claude-sonnet-4-5")
    assert first.final.type == "turn_aborted" and first.final.reason == "context_overflow"
    learnt = env.engine.calibrations.get((env.chat_id, "anthropic", "claude-sonnet-4-5"))
    assert learnt.window is None  # was 1: every later replay refused before sending
    sent = len(env.backend.requests)
    second = await env.turn("b", provider="anthropic", model="claude-sonnet-4-5")
    assert second.committed and len(env.backend.requests) == sent + 1


@pytest.mark.parametrize(("said", "believed"), [
    (None, None), (0, None), (1, None), (MIN_LEARNT_WINDOW - 1, None),
    (MIN_LEARNT_WINDOW, MIN_LEARNT_WINDOW), (100_000, 100_000), (128_000, 128_000),
    (128_001, None), (10**12, None), (True, None)])
def test_a_said_window_is_believed_between_the_floor_and_the_registry(
        said: int | None, believed: int | None) -> None:
    assert sane_window(said, 128_000) == believed


def test_a_learnt_window_expires_and_the_scale_stays() -> None:
    now = [1000.0]
    memory = ContextCalibrations(clock=lambda: now[0])
    memory.learn(KEY, Calibration(scale=2.0, window=50_000))
    now[0] += WINDOW_SECONDS / 2
    memory.learn(KEY, Calibration(scale=2.5, window=50_000))  # a turn recalled it: no younger
    now[0] += WINDOW_SECONDS / 2
    assert memory.get(KEY) == Calibration(scale=2.5, window=50_000)
    now[0] += 1
    assert memory.get(KEY) == Calibration(scale=2.5)  # the registry's window again
    assert memory.learnt[KEY] == Calibration(scale=2.5)
    memory.learn(KEY, Calibration(scale=2.5, window=60_000))  # re-learnt: a new age
    now[0] += WINDOW_SECONDS
    assert memory.get(KEY).window == 60_000
    memory.learn(KEY, Calibration(scale=1.0, window=None))
    assert KEY not in memory.learnt
