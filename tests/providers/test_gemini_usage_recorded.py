"""Gemini Interactions usage, held to the recorded streams (money, 2026-12-04): every
token the API counts is billed once. ``total_tokens`` is input + output + thoughts in
all five recordings, so ``usage_of`` puts the thoughts in the output (billed at the
output rate) once and reports them as reasoning, adds the tool-use prompt to the input,
and keeps the cached part inside the input (the SDK's ``Usage``: "Number of tokens in the
cached part of the prompt")."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from turnstate.providers.gemini_interactions._parser import usage_of

FILES = ("basic", "multi-turn-stateful-turn1", "multi-turn-stateful-turn2",
         "tool-call-step1", "tool-call-step2")


def final_usage(path: Path) -> dict[str, int]:
    for line in reversed(path.read_text(encoding="utf-8").splitlines()):
        frame = json.loads(line) if line.startswith("{") else {}
        if frame.get("event_type") == "interaction.completed":
            return dict(frame["interaction"]["usage"])
    raise AssertionError(f"no interaction.completed in {path}")


@pytest.mark.parametrize("name", FILES)
def test_every_counted_token_is_billed_once(recorded_dir: Path, name: str) -> None:
    raw = final_usage(recorded_dir / "gemini-interactions" / f"{name}.chunks.txt")
    usage = usage_of(raw)
    assert usage.input_tokens + usage.output_tokens == raw["total_tokens"]
    assert usage.reasoning_tokens == raw["total_thought_tokens"]
    assert usage.cached_input_tokens == raw["total_cached_tokens"] <= usage.input_tokens


def test_tool_use_prompt_and_cache_are_input() -> None:
    usage = usage_of({"total_input_tokens": 900, "total_tool_use_tokens": 100,
                      "total_cached_tokens": 600, "total_output_tokens": 20,
                      "total_thought_tokens": 30, "total_tokens": 1050})
    assert (usage.input_tokens, usage.cached_input_tokens, usage.output_tokens) == (
        1000, 600, 50)
    assert usage.uncached_input_tokens == 400


def test_a_recorded_cursor_turn_reports_only_its_new_input(recorded_dir: Path) -> None:
    """A finding, pinned (not a defect turnstate can fix): the second turn of a stateful
    chat, sent with ``previous_interaction_id``, reports 12 input tokens, its new
    question alone, while the model read the first turn (10 input tokens and a 31-token
    answer) to answer it. Whether Google bills the stored history is undocumented, so a
    Gemini cursor turn's cost is what Google reports (docs/decisions.md, 2026-12-04)."""
    folder = recorded_dir / "gemini-interactions"
    first = usage_of(final_usage(folder / "multi-turn-stateful-turn1.chunks.txt"))
    second = usage_of(final_usage(folder / "multi-turn-stateful-turn2.chunks.txt"))
    assert (first.input_tokens, first.output_tokens - first.reasoning_tokens) == (10, 31)
    assert second.input_tokens == 12 < first.input_tokens + 31
