"""A PostgreSQL DSN that cannot be a URL is a one-line error (attack8).

``turnstate inspect 'postgresql://user:pw@[::1/db' C`` ended ``internal error:
ValueError: Invalid IPv6 URL`` (the DSN's split, before any connection), and a port past
65535 ``internal error: OverflowError: connect(): port must be 0-65535``; ``serve
--db`` the same at its start. Each is now refused naming the problem, never the DSN
(it may hold a password): a usage error for ``serve`` (exit 2, before anything is
created), exit 1 for the commands that open an existing database.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from turnstate.cli import main

BAD = {"postgresql://ann:s3cret@[::1/chats": "not a URL",
       "postgres://ann:s3cret@127.0.0.1:99999/chats": "port 99999",
       "postgresql://ann:s3cret@127.0.0.2:70000,127.0.0.1:5432/chats": "port 70000"}


@pytest.mark.parametrize("dsn", sorted(BAD))
@pytest.mark.parametrize("command", ["inspect", "release", "diagrams"])
def test_inspect_and_release_name_the_problem_in_one_line(
        dsn: str, command: str, capsys: pytest.CaptureFixture[str]) -> None:
    args = [command, "--turn", dsn, "t"] if command == "diagrams" else [command, dsn, "c"]
    assert main(args) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"turnstate {command}: ") and err.count("\n") == 1, err
    assert BAD[dsn] in err and "internal error" not in err and "s3cret" not in err


@pytest.mark.parametrize("dsn", sorted(BAD))
def test_serve_refuses_it_before_creating_anything(
        dsn: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exited:
        main(["serve", "--port", "0", "--db", dsn])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert BAD[dsn] in err and "s3cret" not in err
    assert list(tmp_path.iterdir()) == []
