"""``turnstate release`` never creates or migrates a database (hunt-api).

It opened its DB as a server does, creating and migrating the schema: an operator who
named the wrong file (an empty one, another application's SQLite database) or mistyped a
PostgreSQL ``?schema=`` got turnstate's tables (and, on SQLite, WAL mode) written into
it, and only then "no chat with id ...". Now, like ``inspect``, it refuses a database
that does not hold this turnstate's schema, in one line, having written nothing.
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from tests import pg_support
from tests.cli.test_cli import run_cli


def _tables(db: Path) -> tuple[list[str], str]:
    conn = sqlite3.connect(db)
    try:
        names = [row[0] for row in conn.execute("SELECT name FROM sqlite_master ORDER BY name")]
        return names, conn.execute("PRAGMA journal_mode").fetchone()[0]
    finally:
        conn.close()


def test_release_writes_nothing_into_an_empty_file(tmp_path: Path) -> None:
    empty = tmp_path / "empty.sqlite"
    empty.touch()
    result = run_cli("release", str(empty), "chat")
    assert result.returncode == 1, result.stderr
    assert result.stderr.startswith("turnstate release: database schema version 0")
    assert "nothing was created or migrated" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert empty.stat().st_size == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty.sqlite"]


def test_release_writes_nothing_into_another_applications_database(tmp_path: Path) -> None:
    other = tmp_path / "app.sqlite"
    conn = sqlite3.connect(other)
    conn.execute("CREATE TABLE accounts (id INTEGER PRIMARY KEY)")
    conn.commit()
    conn.close()
    result = run_cli("release", str(other), "chat")
    assert result.returncode == 1 and "nothing was created or migrated" in result.stderr
    assert _tables(other) == (["accounts"], "delete")


@pytest.mark.usefixtures("pg_schema")
def test_release_never_creates_a_postgres_schema() -> None:
    import asyncpg

    typo = f"{pg_support.SCHEMA}_release_typo"
    result = run_cli("release", f"{pg_support.DSN}?schema={typo}", "chat")
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "nothing was created or migrated" in result.stderr

    async def exists() -> bool:
        conn = await asyncpg.connect(pg_support.DSN)
        try:
            found = bool(await conn.fetchval(
                "SELECT count(*) FROM information_schema.schemata WHERE schema_name = $1",
                typo))
            if found:  # the old code made it: leave the server as it was
                await conn.execute(f"DROP SCHEMA {typo} CASCADE")
            return found
        finally:
            await conn.close()

    assert not asyncio.run(exists())
