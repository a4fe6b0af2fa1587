"""``turnstate serve --lease-seconds`` (issue 20): the lease a node's turns take."""

from __future__ import annotations

from typing import Any

import pytest

from turnstate.cli import main
from turnstate.commands import serve


def test_serve_passes_its_lease_to_the_server(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[Any] = []
    monkeypatch.setattr(serve, "run_server", lambda options: seen.append(options) or 0)
    assert main(["serve", "--lease-seconds", "2.5"]) == 0
    assert main(["serve"]) == 0
    assert [options.lease_seconds for options in seen] == [2.5, 30.0]


@pytest.mark.parametrize("seconds", ["0", "-1", "nan", "inf"])
def test_a_bad_lease_is_one_line_and_exit_1(
        seconds: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(serve, "run_server", lambda options: pytest.fail("server started"))
    assert main(["serve", f"--lease-seconds={seconds}"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--lease-seconds must be a positive" in err
