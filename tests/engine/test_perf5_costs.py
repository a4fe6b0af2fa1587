"""A cursor turn's work cut by whole pieces (issue 26, helper perf5): what a turn no
longer does, each checked so that the old code fails, and each cut held equal to the
path it replaces."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.engine.support import Env, make_turn
from tests.helpers import record_calls
from turnstate.core._conversation import TextPart, Usage
from turnstate.core._generation import GenerationSettings
from turnstate.engine import _limits
from turnstate.engine._lifecycle import TurnLife
from turnstate.engine._turn_input import ContextSettings, TurnInput
from turnstate.storage import SqliteStore, _sqlite_conn
from turnstate.storage._protocol import TurnCommit, TurnStart


def _with(turn: TurnInput, **changes: Any) -> TurnInput:
    """``turn`` with fields set past ``TurnInput``'s converters (as a caller's odd
    values reach ``type_problem``)."""
    for name, value in changes.items():
        object.__setattr__(turn, name, value)
    return turn


ODD: list[dict[str, Any]] = [
    {}, {"provider": 1}, {"model": None}, {"system_prompt": b"x"}, {"user_text": 3.0},
    {"turn_id": "t-1"}, {"turn_id": ""}, {"turn_id": "a b"}, {"turn_id": 7},
    {"owner": "bob"}, {"owner": 5}, {"tools": []}, {"tools": None}, {"tools": ("x",)},
    {"settings": {}}, {"context": None}, {"recover_tool_results": "no"},
    {"tool_iteration_limit": True}, {"tool_iteration_limit": -1},
    {"provider": "openai\u00e9", "owner": None, "turn_id": "x" * 129},
]


@pytest.mark.parametrize("changes", ODD)
@pytest.mark.parametrize("tools", [(), None])
def test_the_usual_turns_type_check_answers_as_field_by_field(
        changes: dict[str, Any], tools: tuple[()] | None) -> None:
    turn = _with(make_turn("hi", tools=tools), **changes)
    assert _answer(_limits.type_problem, turn) == _answer(_limits._field_problem, turn)


def _answer(check: Any, turn: TurnInput) -> Any:
    try:
        return check(turn)
    except Exception as exc:  # compared: type and text (``tools=None`` fails alike)
        return type(exc), str(exc)


def test_the_usual_turn_is_type_checked_in_one_test(monkeypatch: pytest.MonkeyPatch) -> None:
    """A turn of plain strings, default records and no tools is not checked field by
    field (four ``getattr`` loops and their f-string-free passes)."""
    def by_field(_: object) -> None:
        raise AssertionError("checked field by field")

    monkeypatch.setattr(_limits, "_field_problem", by_field)
    turn = make_turn("hi", tools=())
    assert type(turn.settings) is GenerationSettings and type(turn.context) is ContextSettings
    assert _limits.type_problem(turn) is None
    assert _limits.type_problem(make_turn("hi", tools=(), turn_id="t-1", owner="a")) is None


async def test_an_untraced_turn_reads_no_spans_per_event(env: Env) -> None:
    """``observe`` was a no-op function called before every event of an untraced turn."""
    assert env.engine.tracer is None
    life = TurnLife(env.engine, env.chat_id, make_turn("hi"), attached=True)
    assert life._observed(None) == (None, None)  # type: ignore[arg-type]
    outcome = await env.turn("hello")
    assert outcome.final.type == "turn_completed"


async def test_a_one_statement_write_skips_the_unused_test_seam(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A store that keeps ``_checkpoint``'s no-op calls it seven times less per write
    (``_points`` is not even looked up); a store that overrides it sees every point."""
    points = record_calls(monkeypatch, _sqlite_conn._points, (_sqlite_conn, "_points"))
    seen: list[str] = []

    class Seam(SqliteStore):
        def _checkpoint(self, name: str) -> None:
            seen.append(name)

    for kind in (SqliteStore, Seam):
        async with kind.open(tmp_path / f"{kind.__name__}.db") as store:
            chat = await store.create_chat(owner="a")  # a transaction: its points
            seen.clear()
            points.clear()
            for turn in range(2):  # the second begin and commit are one statement each
                lease = await store.begin_turn(chat.id, TurnStart(
                    turn_id=f"t{turn}", user_parts=(TextPart(text="q"),), provider="openai",
                    model="gpt-4o"))
                await store.commit_turn(lease, TurnCommit(
                    parts=(TextPart(text="a"),), provider_state=None, audit=None,
                    usage=Usage(input_tokens=1, output_tokens=1), context=None,
                    strategy="replay", path=()))
        if kind is SqliteStore:
            assert points == [] and seen == []
    for step in ("begin", "commit"):  # each write's points, in order, twice
        ends = [name for name in seen if name.startswith(step)
                and name.split(":")[1] in {"before", "begun", "before_commit", "committed"}]
        assert ends == [f"{step}:{point}" for point in ("before", "begun", "before_commit",
                                                         "committed")] * 2
