"""The test support drops the PostgreSQL schemas of test runs that were killed (ops10).

A run killed before its end (``kill -9``, a timeout) left its ``ts_test_*`` schemas in
the shared ``test`` database for ever. ``pg_schema``'s setup now drops those whose run is
provably gone (``pg_support.is_dead_run``): never a live run's, which other test runs
on this machine may be using right now.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator

import asyncpg
import pytest

from tests import pg_support
from tests.pg_support import is_dead_run, process_start, schema_name

BOOT = pg_support.host_boot()
pytestmark = pytest.mark.skipif(BOOT is None, reason="no /proc: no boot id, no process start")


@pytest.fixture
def live_pid() -> Iterator[int]:
    """A process alive for the test."""
    child = subprocess.Popen(["sleep", "600"])
    try:
        yield child.pid
    finally:
        child.kill()
        child.wait()


@pytest.fixture
def dead() -> tuple[int, int]:
    """The pid and start tick of a process that has exited (and been reaped)."""
    child = subprocess.Popen(["sleep", "600"])
    start = process_start(child.pid)
    child.kill()
    child.wait()
    assert start is not None
    return child.pid, start


def _dead(name: str, *, now: float | None = None, local: bool = True) -> bool:
    return is_dead_run(name, boot=BOOT, now=time.time() if now is None else now,
                       local_server=local)


def test_a_live_runs_schema_is_never_dead(live_pid: int) -> None:
    name = schema_name(live_pid, BOOT, process_start(live_pid), time.time())
    assert not _dead(name) and not _dead(name + "_serve")
    assert not _dead(pg_support.SCHEMA) and not _dead(pg_support.SCHEMA + "_nodes")


def test_a_gone_process_s_schema_is_dead(dead: tuple[int, int]) -> None:
    pid, start = dead
    name = schema_name(pid, BOOT, start, time.time())
    assert _dead(name) and _dead(name + "_outage_log")


def test_a_reused_pid_does_not_keep_a_dead_run_s_schema(live_pid: int) -> None:
    start = process_start(live_pid)
    assert start is not None
    assert _dead(schema_name(live_pid, BOOT, start + 1, time.time()))


def test_another_host_s_schema_is_dead_only_after_a_day(dead: tuple[int, int]) -> None:
    pid, start = dead
    other = "000000" if BOOT != "000000" else "111111"
    made = time.time()
    name = schema_name(pid, other, start, made)
    assert not _dead(name)
    assert not _dead(name, now=made + pg_support.STALE_SECONDS - 60)
    assert _dead(name, now=made + pg_support.STALE_SECONDS + 60)


def test_an_old_form_schema_needs_a_gone_pid_and_a_server_here(
        live_pid: int, dead: tuple[int, int]) -> None:
    assert _dead(f"ts_test_{dead[0]}_7caf00") and _dead(f"ts_test_{dead[0]}_7caf00_frozen")
    assert not _dead(f"ts_test_{dead[0]}_7caf00", local=False)
    assert not _dead(f"ts_test_{live_pid}_7caf00_gemctx")
    assert not _dead("ts_test_notapid_7caf00") and not _dead("ts_test_")


@pytest.mark.parametrize(("dsn", "local"), [
    ("postgresql://postgres@127.0.0.1:5432/test", True),
    ("postgresql://postgres@localhost/test", True),
    ("postgresql://postgres@[::1]:5432/test", True),
    ("postgresql:///test?host=/var/run/postgresql", True),
    ("postgresql://postgres@db.example:5432/test", False),
    ("postgresql://postgres@10.0.0.5/test", False),
])
def test_a_server_here_is_a_loopback_address_or_a_socket(dsn: str, local: bool) -> None:
    assert pg_support.server_is_local(dsn) is local


async def test_the_setup_drops_the_dead_runs_schemas_and_keeps_the_live_ones(
        pg_schema: str, live_pid: int, dead: tuple[int, int]) -> None:
    now = time.time()
    gone = schema_name(dead[0], BOOT, dead[1], now)
    alive = schema_name(live_pid, BOOT, process_start(live_pid), now)
    names = [gone, gone + "_serve", alive, alive + "_serve"]
    conn = await asyncpg.connect(pg_support.DSN, timeout=5)
    try:
        for name in names:
            await conn.execute(f'CREATE SCHEMA "{name}"')
            await conn.execute(f'CREATE TABLE "{name}".chats (id text)')
        dropped = await pg_support.drop_dead_schemas()
        left = {row[0] for row in await conn.fetch(
            "SELECT nspname FROM pg_namespace WHERE nspname = ANY($1)", names)}
    finally:
        for name in names:
            await conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
        await conn.close()
    assert {gone, gone + "_serve"} <= set(dropped)
    assert left == {alive, alive + "_serve"}
    assert pg_schema not in dropped
