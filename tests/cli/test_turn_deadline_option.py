"""``turnstate serve --turn-deadline`` (deadline10): how long a node's turns may run."""

from __future__ import annotations

from typing import Any

import pytest

from turnstate.cli import main
from turnstate.commands import serve


def test_serve_passes_its_turn_deadline_to_the_server(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[Any] = []
    monkeypatch.setattr(serve, "run_server", lambda options: seen.append(options) or 0)
    assert main(["serve", "--turn-deadline", "90"]) == 0
    assert main(["serve", "--turn-deadline", "inf"]) == 0
    assert main(["serve"]) == 0
    assert [options.turn_seconds for options in seen] == [90.0, float("inf"), 1800.0]


@pytest.mark.parametrize("seconds", ["0", "-1", "nan"])
def test_a_bad_turn_deadline_is_one_line_and_exit_1(
        seconds: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(serve, "run_server", lambda options: pytest.fail("server started"))
    assert main(["serve", f"--turn-deadline={seconds}"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--turn-deadline must be a positive" in err
