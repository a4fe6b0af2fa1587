"""``turnstate serve`` names what is wrong with its database path and its tokens file.

A database file that could not be created (its folder missing) was reported as
"cannot listen on 127.0.0.1:0: No such file or directory" (``serve`` took every
``OSError`` for a bind failure), and a tokens file that is not UTF-8 as an internal
``UnicodeDecodeError``.
"""

from __future__ import annotations

from pathlib import Path

from tests.cli.test_cli_defects import run_in


def test_a_database_file_that_cannot_be_created_is_named(tmp_path: Path) -> None:
    db = tmp_path / "missing" / "chats.sqlite"
    result = run_in(tmp_path, "serve", "--port", "0", "--db", str(db))
    assert result.returncode == 1, result.stderr
    assert f"cannot create the database file {db}" in result.stderr
    assert "cannot listen" not in result.stderr and "Traceback" not in result.stderr


def test_a_tokens_file_that_is_not_utf8_is_named(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_bytes(b"\xff\xfe: x\n")
    result = run_in(tmp_path, "serve", "--port", "0", "--tokens", str(tokens),
                    "--db", str(tmp_path / "chats.sqlite"))
    assert result.returncode == 1, result.stderr
    assert f"the tokens file {tokens} is not UTF-8 text" in result.stderr
    assert "internal error" not in result.stderr and "Traceback" not in result.stderr
