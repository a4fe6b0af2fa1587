"""``open_store`` (the command line's and the server's opener) refuses another
application's database instead of writing turnstate's schema into it (hunt-api).

``turnstate serve --db app.sqlite`` or ``demo --db app.sqlite`` on a file that held
another application's tables created turnstate's tables beside them and switched the
file to WAL mode (which persists in the file). Through ``open_store`` a file with tables
and no turnstate schema is now refused, with nothing written; an empty file or a new path
is created as before. ``SqliteStore.open`` itself still adds turnstate's tables to an
embedder's own file unless asked to refuse (``refuse_foreign``).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from tests.cli.test_cli import run_cli
from turnstate.core import StorageError
from turnstate.storage import SqliteStore, open_store


def _app_database(path: Path) -> Path:
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE accounts (id INTEGER PRIMARY KEY, name TEXT)")
    conn.execute("INSERT INTO accounts (name) VALUES ('ada')")
    conn.commit()
    conn.close()
    return path


def _shape(path: Path) -> tuple[list[str], str]:
    conn = sqlite3.connect(path)
    try:
        names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master ORDER BY name")]
        return names, conn.execute("PRAGMA journal_mode").fetchone()[0]
    finally:
        conn.close()


async def test_another_applications_database_is_refused_untouched(tmp_path: Path) -> None:
    db = _app_database(tmp_path / "app.sqlite")
    with pytest.raises(StorageError, match=r"not a turnstate database: .*\(accounts\)"):
        async with open_store(str(db)):
            pass
    with pytest.raises(StorageError, match=r"not a turnstate database"):
        async with SqliteStore.open(db, refuse_foreign=True):
            pass
    assert _shape(db) == (["accounts"], "delete")


async def test_an_embedder_may_keep_turnstates_tables_in_its_own_file(tmp_path: Path) -> None:
    db = _app_database(tmp_path / "app.sqlite")
    async with SqliteStore.open(db) as store:
        await store.create_chat(owner="o")
    names, mode = _shape(db)
    assert {"accounts", "chats", "schema_migrations"} <= set(names) and mode == "wal"
    async with open_store(str(db)) as store:  # a turnstate database from then on
        assert len(await store.list_chats("o")) == 1


def test_the_demo_says_so_in_one_line(tmp_path: Path) -> None:
    db = _app_database(tmp_path / "app.sqlite")
    result = run_cli("demo", "--db", str(db))
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert result.stderr.startswith("turnstate demo: not a turnstate database")
    assert _shape(db) == (["accounts"], "delete")


async def test_an_empty_file_and_a_turnstate_database_still_open(tmp_path: Path) -> None:
    empty = tmp_path / "empty.sqlite"
    empty.touch()
    for _ in range(2):  # created, then opened again as a turnstate database
        async with SqliteStore.open(empty) as store:
            await store.create_chat(owner="o")
    assert "chats" in _shape(empty)[0]
