"""Ctrl-C in a command is exit 130 and one line saying so, never a traceback (hunt-api).

A ``KeyboardInterrupt`` out of a command (``asyncio.run`` raises it once it has
cancelled the demo's task) returned 130 with nothing on stderr, so a user could not tell
an interrupted demo from one that failed silently.
"""

from __future__ import annotations

import argparse

import pytest

from turnstate import cli


def test_an_interrupted_command_says_so_in_one_line(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    def interrupted(_: argparse.Namespace) -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr(cli.COMMANDS["demo"], "run", interrupted)
    assert cli.main(["demo"]) == 130
    captured = capsys.readouterr()
    assert captured.err == "turnstate demo: interrupted\n" and captured.out == ""
