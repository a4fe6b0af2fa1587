"""The command line on PostgreSQL: ``demo --db``, ``inspect`` and ``diagrams --turn`` take
a ``postgresql://`` DSN wherever they take an SQLite file."""

from __future__ import annotations

import json
from pathlib import Path

from tests import pg_support
from tests.cli.test_cli import run_cli
from turnstate.storage import open_store, redact_dsn, split_schema


def _dsn(suffix: str) -> str:
    return f"{pg_support.DSN}?schema={pg_support.SCHEMA}_{suffix}"


def test_demo_inspect_and_diagram_on_postgres(pg_schema: str, tmp_path: Path) -> None:
    """The demo runs on PostgreSQL; inspect and a path diagram read the chat back."""
    dsn = _dsn("cli")
    result = run_cli("demo", "--json", "--db", dsn)
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["summary"]["committed"] >= 8 and doc["summary"]["aborted"] >= 1
    chat = doc["summary"]["chatId"]
    shown = run_cli("inspect", dsn, chat)
    assert shown.returncode == 0, shown.stderr
    assert f"chat {chat}" in shown.stdout and "tool_result_cursor_loss" in shown.stdout
    assert "recovered=true" in shown.stdout and "path: validate -> " in shown.stdout
    aborted = next(t for t in doc["turns"] if t["abort"])
    drawn = run_cli("diagrams", "--turn", dsn, aborted["turnId"], "--out", str(tmp_path))
    assert drawn.returncode == 0, drawn.stderr
    assert (tmp_path / f"turn-{aborted['turnId']}.mmd").is_file()


def test_unknown_chat_on_postgres_is_one_line(pg_schema: str) -> None:
    """An unknown chat in a PostgreSQL database is one clear line and exit 1 (inspect
    never creates the schema: it is made here first)."""

    async def create_schema() -> None:
        async with open_store(_dsn("cli_empty")):
            pass

    pg_support.run_sync(create_schema())
    result = run_cli("inspect", _dsn("cli_empty"), "nope")
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "nope" in result.stderr


def test_unreachable_server_is_one_line_without_the_password() -> None:
    """A DSN nobody answers gives one line naming the server, never its password."""
    result = run_cli("inspect", "postgresql://alice:s3cret@127.0.0.1:1/db", "c1")
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "127.0.0.1:1" in result.stderr and "s3cret" not in result.stderr


def test_dsn_schema_and_redaction() -> None:
    """``?schema=`` picks the PostgreSQL schema and is not passed on; passwords are hidden."""
    assert split_schema("postgresql://u@h/db?schema=tenant_a&sslmode=disable") == (
        "postgresql://u@h/db?sslmode=disable", "tenant_a")
    assert split_schema("postgres://u@h:5/db") == ("postgres://u@h:5/db", "turnstate")
    assert redact_dsn("postgresql://u:pw@h:5/db?x=1") == "postgresql://u@h:5/db?x=1"
    assert redact_dsn("/tmp/chats.db") == "/tmp/chats.db"
    assert redact_dsn("postgresql://u@h:5/db?password=s3cret&sslmode=disable") \
        == "postgresql://u@h:5/db?sslmode=disable"
    assert "s3cret" not in redact_dsn("postgres://h/db?PassWord=s3cret&passfile=/x/s3cret")
