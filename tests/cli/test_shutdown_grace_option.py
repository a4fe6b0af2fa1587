"""``turnstate serve --shutdown-grace``: the most the whole shutdown may take."""

from __future__ import annotations

from typing import Any

import pytest

from turnstate.cli import main
from turnstate.commands import serve


def test_serve_passes_its_shutdown_grace_to_the_server(
        monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[Any] = []
    monkeypatch.setattr(serve, "run_server", lambda options: seen.append(options) or 0)
    assert main(["serve", "--shutdown-grace", "8"]) == 0
    assert main(["serve"]) == 0
    assert [options.shutdown_grace for options in seen] == [8.0, 25.0]


@pytest.mark.parametrize("seconds", ["0", "-1", "nan", "inf"])
def test_a_bad_shutdown_grace_is_one_line_and_exit_1(
        seconds: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(serve, "run_server", lambda options: pytest.fail("server started"))
    assert main(["serve", f"--shutdown-grace={seconds}"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--shutdown-grace must be a positive" in err
