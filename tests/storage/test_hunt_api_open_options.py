"""The stores' ``open`` options of the wrong type or range are typed errors naming the
option, before anything is opened (hunt-api).

``PostgresStore.open(statement_timeout=-1)`` opened with a 1 ms timeout on every
statement, ``pool_min=True`` was taken, and a string for a pool size or
``acquire_timeout`` raised a bare ``TypeError`` (the latter after the pool was made,
leaving a coroutine never awaited); ``SqliteStore.open(None)`` raised ``os.fspath``'s
bare ``TypeError``, a path holding NUL a bare ``ValueError``, and a negative or string
``busy_timeout_ms`` was taken.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from turnstate.core import ConfigurationError, StorageError
from turnstate.storage import SqliteStore

UNREACHABLE = "postgresql://nobody@127.0.0.1:1/none"  # refused first, or this would fail


@pytest.mark.parametrize(("options", "needle"), [
    ({"statement_timeout": -1}, "statement_timeout must be a positive number"),
    ({"statement_timeout": 0}, "statement_timeout must be a positive number"),
    ({"statement_timeout": float("nan")}, "statement_timeout must be a positive number"),
    ({"acquire_timeout": "x"}, "acquire_timeout must be a positive number"),
    ({"command_timeout": 0}, "command_timeout must be a positive number"),
    ({"command_timeout": "5"}, "command_timeout must be a positive number"),
    ({"acquire_timeout": float("inf")}, "acquire_timeout must be a positive number"),
    ({"pool_min": True, "pool_max": True}, "need 1 <= pool_min <= pool_max"),
    ({"pool_min": "1"}, "need 1 <= pool_min <= pool_max"),
    ({"pool_max": 2.5}, "need 1 <= pool_min <= pool_max"),
])
async def test_postgres_options_are_checked_before_connecting(options: dict[str, Any],
                                                              needle: str) -> None:
    pytest.importorskip("asyncpg")
    from turnstate.storage import PostgresStore

    with pytest.raises(ConfigurationError, match=needle):
        async with PostgresStore.open(UNREACHABLE, **options):
            pass


@pytest.mark.parametrize(("path", "options", "error", "needle"), [
    (None, {}, ConfigurationError, "needs a file path or ':memory:', got NoneType"),
    (5, {}, ConfigurationError, "got int"),
    ("a\0b.sqlite", {}, StorageError, "cannot open"),
    ("x.sqlite", {"busy_timeout_ms": -1}, ConfigurationError, "busy_timeout_ms"),
    ("x.sqlite", {"busy_timeout_ms": "5"}, ConfigurationError, "busy_timeout_ms"),
])
async def test_sqlite_options_are_checked_before_opening(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, path: object,
        options: dict[str, Any], error: type[Exception], needle: str) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(error, match=needle):
        async with SqliteStore.open(path, **options):  # type: ignore[arg-type]
            pass
    assert _files(tmp_path) == []


def _files(folder: Path) -> list[Path]:
    return list(folder.iterdir())
