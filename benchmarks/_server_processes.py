"""``bench_server.py --processes N``: several ``turnstate serve`` processes on PostgreSQL.

The servers are real ``turnstate serve`` processes (emulated providers in each), sharing
one PostgreSQL schema created for the run and dropped at its end; they are started one
after the other (the first creates the tables). One client process (full priority) runs
the load levels with its clients spread round-robin over the servers. Reported per
level: turns/s, p50/p99 time to the first SSE byte, p50/p99 whole-turn time, the
servers' CPU per turn (from ``/proc/<pid>/stat``, 10 ms ticks, so only a level's total
is meaningful), failed clients and leases left behind (read from the database).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import signal
import sys
import tempfile
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import asyncpg

from benchmarks._util import error_kinds, figure
from turnstate.emulators._emulated import EMULATOR_API_KEY, kind_of
from turnstate.providers._protocol import ProviderAdapter

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DSN = os.environ.get("TURNSTATE_PG_DSN", "postgresql://postgres@127.0.0.1:5432/test")
TOKEN = "bench-token"
TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """A process's user + system CPU seconds so far (``/proc/<pid>/stat``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


ONE_OWNER = ("--max-streams-per-owner", "1000000", "--max-turns-per-owner", "1000000")
"""Every client of the benchmark is the one owner ``bench``: no per-owner bound."""


async def start_serve(dsn: str, schema: str, tokens: Path, extra: Sequence[str] = (),
                      ) -> tuple[asyncio.subprocess.Process, str]:
    """One ``turnstate serve`` on a free port; (process, base URL) once it listens."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "turnstate.cli", "serve", "--port", "0",
        "--db", f"{dsn}?schema={schema}", "--tokens", str(tokens), *ONE_OWNER, *extra,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL, env=env,
        cwd=tokens.parent)
    assert proc.stdout is not None
    lines = []
    while line := (await asyncio.wait_for(proc.stdout.readline(), 60)).decode():
        lines.append(line)
        if line.startswith("open "):
            return proc, line.split()[1].split("#")[0].rstrip("/")
    await proc.wait()
    msg = f"turnstate serve exited {proc.returncode}: {''.join(lines)!r}"
    raise RuntimeError(msg)


@contextlib.asynccontextmanager
async def servers(count: int, dsn: str, extra: Sequence[str] = ()) -> AsyncIterator[
        tuple[list[asyncio.subprocess.Process], list[str], str]]:
    """``count`` serve processes on one fresh schema; stopped and the schema dropped."""
    schema = f"bench_server_{os.getpid()}_{secrets.token_hex(3)}"
    procs: list[asyncio.subprocess.Process] = []
    bases: list[str] = []
    with tempfile.TemporaryDirectory() as folder:
        tokens = Path(folder) / "tokens"
        tokens.write_text(f"bench: {TOKEN}\n")
        try:
            for _ in range(count):  # one after the other: the first creates the tables
                proc, base = await start_serve(dsn, schema, tokens, extra)
                procs.append(proc)
                bases.append(base)
            yield procs, bases, schema
        finally:
            for proc in procs:
                if proc.returncode is None:
                    proc.send_signal(signal.SIGTERM)
            for proc in procs:
                try:
                    await asyncio.wait_for(proc.wait(), 30)
                except TimeoutError:
                    proc.kill()
                    await proc.wait()
            connection = await asyncpg.connect(dsn)
            try:
                await connection.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
            finally:
                await connection.close()


@contextlib.asynccontextmanager
async def emulator_process(provider: str) -> AsyncIterator[
        tuple[asyncio.subprocess.Process, ProviderAdapter]]:
    """``turnstate emulate PROVIDER`` in its own process, and an adapter pointed at it:
    the emulator's CPU is then not the server's (stopped at the end)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "turnstate.cli", "emulate", provider,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL, env=env)
    assert proc.stdout is not None
    try:
        line = (await asyncio.wait_for(proc.stdout.readline(), 60)).decode()
        if " listening on " not in line:
            msg = f"turnstate emulate {provider} said {line!r}"
            raise RuntimeError(msg)
        url = line.split(" listening on ")[1].split()[0]
        yield proc, kind_of(provider).adapter(base_url=url, api_key=EMULATOR_API_KEY)
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(proc.wait(), 30)
            except TimeoutError:
                proc.kill()
                await proc.wait()


async def leases_left(dsn: str, schema: str) -> int:
    connection = await asyncpg.connect(dsn)
    try:
        value = await connection.fetchval(
            f'SELECT count(*) FROM "{schema}".chats WHERE active_turn_id IS NOT NULL')
    finally:
        await connection.close()
    return int(value)


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def report(n: int, count: int, result: dict[str, Any], cpu: float, leases: int) -> None:
    samples = result["samples"]
    first, whole = [s[0] * 1000 for s in samples], [s[1] * 1000 for s in samples]
    label = f"{count} procs, N={n}"
    print(f"-- {label}: {n} concurrent SSE clients over {count} turnstate serve processes "
          "on PostgreSQL")
    figure(f"{label}: turns per second", len(samples) / result["elapsed"], "turn/s")
    figure(f"{label}: time to first byte p50", pct(first, 0.5), "ms")
    figure(f"{label}: time to first byte p99", pct(first, 0.99), "ms")
    figure(f"{label}: turn time p50", pct(whole, 0.5), "ms")
    figure(f"{label}: turn time p99", pct(whole, 0.99), "ms")
    figure(f"{label}: servers' CPU per turn", cpu / max(1, len(samples)) * 1e6, "us")
    figure(f"{label}: failed clients", len(result["errors"]), "")
    figure(f"{label}: leases left behind", leases, "")
    if result["errors"]:
        print(f"   first error: {result['errors'][0]}")
        error_kinds(result["errors"])
