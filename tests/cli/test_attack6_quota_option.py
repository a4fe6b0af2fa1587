"""``turnstate serve --max-stored-bytes-per-owner``: the quota the server sets in the
database at start (``_serve``), refused with one line when it is no number of bytes."""

from __future__ import annotations

import asyncio
import io
from pathlib import Path
from typing import Any

import pytest

from turnstate.cli import main
from turnstate.commands import serve
from turnstate.server import _serve
from turnstate.storage import SqliteStore


def test_serve_passes_the_quota(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[Any] = []
    monkeypatch.setattr(serve, "run_server", lambda options: seen.append(options) or 0)
    assert main(["serve", "--max-stored-bytes-per-owner", "1000000"]) == 0
    assert main(["serve"]) == 0
    assert [options.max_stored_bytes_per_owner for options in seen] == [1_000_000, None]


@pytest.mark.parametrize("value", ["-1", str(2**63)])
def test_a_bad_quota_is_one_line_and_exit_1(
        value: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(serve, "run_server", lambda options: pytest.fail("server started"))
    assert main(["serve", f"--max-stored-bytes-per-owner={value}"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--max-stored-bytes-per-owner must be" in err


async def test_the_server_sets_the_quota_in_the_database_at_start(tmp_path: Path) -> None:
    db = tmp_path / "chats.db"
    tokens = tmp_path / "tokens"
    tokens.write_text("alice: alice-token\n")
    tokens.chmod(0o600)
    stop = asyncio.Event()
    stop.set()  # serve, then stop at once
    options = _serve.ServeOptions(db=str(db), tokens=tokens, port=0,
                                  max_stored_bytes_per_owner=5000)
    assert await _serve._serve(options, io.StringIO(), stop) == 0
    async with SqliteStore.open(db) as store:
        assert await store.storage_quota() == 5000
