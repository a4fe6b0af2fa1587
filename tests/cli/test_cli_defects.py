"""The command line as a new user met it: ports checked before anything is created, a
closed pipe, subcommand usage and help, a read-only inspect, diagrams outside a checkout."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import types
from pathlib import Path

import pytest

from tests import pg_support
from tests.cli.test_cli import ROOT, run_cli


def run_in(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "turnstate.cli", *args], capture_output=True,
                          text=True, timeout=60, cwd=folder, env=env, check=False)


@pytest.mark.parametrize("args", [["serve", "--port", "99999"], ["serve", "--port", "x"],
                                  ["emulate", "openai", "--port", "-1"]])
def test_a_bad_port_is_a_usage_error_before_anything_is_created(
        tmp_path: Path, args: list[str]) -> None:
    result = run_in(tmp_path, *args)
    assert result.returncode == 2, result.stderr
    assert f"usage: turnstate {args[0]}" in result.stderr
    assert "is not a port (0 to 65535)" in result.stderr
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr
    assert list(tmp_path.iterdir()) == []  # no tokens file, no database


def test_a_closed_pipe_ends_the_demo_quietly(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "turnstate.cli", "demo"], cwd=tmp_path,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # like `| head -2` once it has its lines: nobody reads any more
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 141
    assert err == ""


def test_an_unknown_option_shows_the_subcommands_usage_and_help_describes_it() -> None:
    bogus = run_cli("demo", "--bogus")
    assert bogus.returncode == 2
    assert bogus.stderr.startswith("usage: turnstate demo ")
    assert "unrecognized arguments: --bogus" in bogus.stderr
    for command, words in (("demo", "scripted chat"), ("serve", "JSON + SSE API"),
                           ("inspect", "read-only"), ("emulate", "wire format"),
                           ("diagrams", "transition table")):
        shown = run_cli(command, "--help")
        assert shown.returncode == 0 and words in " ".join(shown.stdout.split()), command


def test_inspect_never_migrates_an_sqlite_file(tmp_path: Path) -> None:
    empty = tmp_path / "empty.sqlite"
    empty.touch()
    result = run_cli("inspect", str(empty), "chat")
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "nothing was created or migrated" in result.stderr
    assert empty.stat().st_size == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty.sqlite"]


@pytest.mark.usefixtures("pg_schema")
def test_inspect_never_creates_a_postgres_schema() -> None:
    import asyncpg

    typo = f"{pg_support.SCHEMA}_typo"
    result = run_cli("inspect", f"{pg_support.DSN}?schema={typo}", "chat")
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "nothing was created or migrated" in result.stderr

    async def exists() -> bool:
        conn = await asyncpg.connect(pg_support.DSN)
        try:
            return bool(await conn.fetchval(
                "SELECT count(*) FROM information_schema.schemata WHERE schema_name = $1",
                typo))
        finally:
            await conn.close()

    assert not asyncio.run(exists())


def test_diagrams_check_outside_a_checkout_says_so(tmp_path: Path) -> None:
    result = run_in(tmp_path, "diagrams", "--check")
    assert result.returncode == 1
    assert "no diagrams in diagrams (outside a checkout? pass --out DIR)" in result.stdout
    assert "stale" not in result.stdout


def test_diagrams_turn_writes_into_the_current_directory(tmp_path: Path) -> None:
    db = tmp_path / "d.sqlite"
    assert run_in(tmp_path, "demo", "--db", str(db)).returncode == 0
    import sqlite3

    with sqlite3.connect(db) as conn:
        (turn_id,) = conn.execute("SELECT id FROM turns LIMIT 1").fetchone()
    drawn = run_in(tmp_path, "diagrams", "--turn", str(db), turn_id)
    assert drawn.returncode == 0, drawn.stderr
    assert (tmp_path / f"turn-{turn_id}.mmd").is_file()
    assert not (tmp_path / "diagrams").exists()


def test_bench_server_has_help() -> None:
    result = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_server.py"),
                             "--help"], capture_output=True, text=True, timeout=60,
                            check=False, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage: bench_server.py") and "--profile" in result.stdout


def test_bench_server_stub_engine_has_what_the_detached_runner_reads() -> None:
    """``bench_server``'s stub engine stands in for ``TurnEngine`` under the detached
    runner: every ``self.engine.X`` that runner reads must be there (lifecycle7's
    ``run_detached_turn`` was not, and the benchmark's own-work part failed with 500)."""
    sys.path.insert(0, str(ROOT))
    from benchmarks.bench_server import StubEngine

    engine = types.SimpleNamespace(registry=None, adapters={}, limits=None, store=object(),
                                   clock=lambda: 0.0, lease_seconds=30.0)
    stub = StubEngine(engine, [])  # type: ignore[arg-type]
    read: set[str] = set()
    for name in ("_detached.py", "_detached_upkeep.py"):
        text = (ROOT / "turnstate" / "engine" / name).read_text(encoding="utf-8")
        read |= set(re.findall(r"self\.engine\.(\w+)", text))
    assert read, "the runner reads nothing of its engine?"
    assert sorted(name for name in read if not hasattr(stub, name)) == []
