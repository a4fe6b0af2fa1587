"""A tokens file other users of the machine can read hands them every owner's chats:
``turnstate serve`` says so once at start (attack, 2026-12-04: permissions were never
checked on load)."""

from __future__ import annotations

import io
import logging
from pathlib import Path

import pytest

from turnstate.server import _serve
from turnstate.server._serve import ServeOptions


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.levelno == logging.WARNING and "tokens file" in r.getMessage()]


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o606, 0o660])
def test_a_tokens_file_others_can_use_is_served_with_a_warning(
        mode: int, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "tokens"
    path.write_text("alice: alice-token\n")
    path.chmod(mode)
    with caplog.at_level(logging.WARNING, logger="turnstate"):
        tokens = _serve._tokens(ServeOptions(tokens=path), io.StringIO())
    assert tokens == {"alice-token": "alice"}  # still served
    assert _warnings(caplog) == [
        f"the tokens file {path} is readable or writable by other users (mode {mode:03o}); "
        "chmod 600 it"]


def test_a_private_or_created_tokens_file_says_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "tokens"
    path.write_text("alice: alice-token\n")
    path.chmod(0o600)
    monkeypatch.chdir(tmp_path)  # the default file is created here, mode 0600
    with caplog.at_level(logging.WARNING, logger="turnstate"):
        _serve._tokens(ServeOptions(tokens=path), io.StringIO())
        _serve._tokens(ServeOptions(), io.StringIO())
    assert _warnings(caplog) == []
