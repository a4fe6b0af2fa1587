"""A chat or turn id on the command line that is not UTF-8 is one clear line, exit 1.

The shell passes any bytes; Python decodes the undecodable ones as lone surrogates,
which SQLite's driver cannot encode: ``inspect`` and ``release`` said "internal error:
UnicodeEncodeError", ``diagrams --turn`` "sqlite: 'utf-8' codec can't encode ...".
"""

from __future__ import annotations

import os
from pathlib import Path

from tests.cli.test_cli import run_cli

NOT_UTF8 = os.fsdecode(b"\xff\xfe")


def test_ids_that_are_not_utf8_are_refused_in_one_line(tmp_path: Path) -> None:
    db = tmp_path / "d.sqlite"
    assert run_cli("demo", "--db", str(db)).returncode == 0
    for args, name in ((["inspect", str(db), NOT_UTF8], "CHAT_ID"),
                       (["release", str(db), NOT_UTF8], "CHAT_ID"),
                       (["diagrams", "--turn", str(db), NOT_UTF8], "TURN_ID")):
        result = run_cli(*args)
        assert result.returncode == 1, result.stderr
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr
        assert f"{name} is not UTF-8 text" in result.stderr, result.stderr
        assert "internal error" not in result.stderr and "codec" not in result.stderr
