"""``turnstate serve --pg-pool-min/--pg-pool-max``: the PostgreSQL pool a serve process
opens (issue 26: a busy node's turns wait for a pooled connection)."""

from __future__ import annotations

import io
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from tests import pg_support
from turnstate.cli import main
from turnstate.commands import serve as serve_command
from turnstate.server import _serve
from turnstate.server._serve import ServeOptions
from turnstate.storage import open_store


def test_serve_passes_the_pool_bounds_to_the_server(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[Any] = []
    monkeypatch.setattr(serve_command, "run_server", lambda options: seen.append(options) or 0)
    assert main(["serve", "--pg-pool-max", "40", "--pg-pool-min", "4"]) == 0
    assert main(["serve"]) == 0
    assert [(o.pg_pool_min, o.pg_pool_max) for o in seen] == [(4, 40), (1, 10)]


@pytest.mark.parametrize("args", [["--pg-pool-max", "0"], ["--pg-pool-min", "0"],
                                  ["--pg-pool-min", "5", "--pg-pool-max", "4"]])
def test_bad_pool_bounds_are_one_line_and_exit_1(
        args: list[str], monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(serve_command, "run_server", lambda options: pytest.fail("started"))
    assert main(["serve", *args]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--pg-pool-max" in err


class Opened(Exception):
    """Raised by the stand-in store opener: the test has what it wanted."""


async def test_serve_opens_its_store_with_the_pool_bounds(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    seen: list[Any] = []

    @asynccontextmanager
    async def opener(target: str, **options: Any) -> AsyncIterator[None]:
        seen.append((target, options))
        raise Opened
        yield  # pragma: no cover - an async context manager needs a yield

    monkeypatch.setattr(_serve, "open_store", opener)
    (tmp_path / "tokens").write_text("alice: alice-token\n")
    options = ServeOptions(db="postgresql://nobody@127.0.0.1:1/none", port=0,
                           tokens=tmp_path / "tokens", pg_pool_min=3, pg_pool_max=30)
    with pytest.raises(Opened):
        await _serve.serve(options, out=io.StringIO(), err=io.StringIO())
    assert seen == [("postgresql://nobody@127.0.0.1:1/none",
                     {"pg_pool": (3, 30), "pg_timeouts": (30.0, 10.0)})]


async def test_open_store_sizes_the_postgres_pool(pg_schema: str) -> None:
    target = f"{pg_support.DSN}?schema={pg_schema}_pool"
    async with open_store(target, pg_pool=(2, 3)) as store:
        pool = store._pool  # type: ignore[attr-defined]
        assert (pool.get_min_size(), pool.get_max_size()) == (2, 3)
    async with open_store(target) as store:
        pool = store._pool  # type: ignore[attr-defined]
        assert (pool.get_min_size(), pool.get_max_size()) == (1, 10)  # PostgresStore's own


def test_serve_passes_the_database_timeouts(monkeypatch: pytest.MonkeyPatch) -> None:
    """``--pg-statement-timeout`` / ``--pg-acquire-timeout``: how long a node waits on a
    silent database before it answers 503 (crash, 2026-12-04: 35 s and 10 s, fixed)."""
    seen: list[Any] = []
    monkeypatch.setattr(serve_command, "run_server", lambda options: seen.append(options) or 0)
    assert main(["serve", "--pg-statement-timeout", "4", "--pg-acquire-timeout", "1.5"]) == 0
    assert main(["serve"]) == 0
    assert [(o.pg_statement_timeout, o.pg_acquire_timeout) for o in seen] == [
        (4.0, 1.5), (30.0, 10.0)]


@pytest.mark.parametrize("args", [["--pg-statement-timeout", "0"],
                                  ["--pg-acquire-timeout", "-1"],
                                  ["--pg-statement-timeout", "nan"]])
def test_bad_database_timeouts_are_one_line_and_exit_1(
        args: list[str], monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(serve_command, "run_server", lambda options: pytest.fail("started"))
    assert main(["serve", *args]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--pg-statement-timeout and --pg-acquire-timeout" in err


async def test_open_store_sets_the_postgres_timeouts(pg_schema: str) -> None:
    target = f"{pg_support.DSN}?schema={pg_schema}_timeouts"
    async with open_store(target, pg_timeouts=(4.0, 1.5)) as store:
        assert store._command_timeout == 9.0  # type: ignore[attr-defined]
        assert store._acquire_timeout == 1.5  # type: ignore[attr-defined]
        async with store._pool.acquire() as conn:  # type: ignore[attr-defined]
            assert await conn.fetchval("SHOW statement_timeout") == "4s"
