"""PostgreSQL for the tests: the DSN, this run's schema, reachability, canonical raw rows.

The server is ``TURNSTATE_PG_DSN`` (default ``postgresql://postgres@127.0.0.1:5432/test``).
Each test run works in its own schema, ``SCHEMA``, which the ``pg_schema`` fixture drops
at the end of the run. Without a reachable server the PostgreSQL tests skip with one
reason; with ``CI=true`` they fail instead.

A run killed before its end (``kill -9``, a timeout) leaves its schemas behind, so the
name says whose they are: ``ts_test_<pid>_h<host>_<start>_<made>`` (the run's pid; ``h``
and six hex digits of a digest of this host's boot id and PID namespace; the process's
start time in clock ticks since boot and the Unix second it was named, both base 36).
``drop_dead_schemas`` (at ``pg_schema``'s setup) drops the schemas of runs that are
provably gone: named on this host, boot and PID namespace, and no process has that pid
or the one that has it started at another tick (a reused pid); and any named more than
a day ago. A schema of another host, boot or namespace is left alone unless it is that
old; one of the older form (``ts_test_<pid>_<6 hex>``, which names no host) only when no
process here has its pid and the server is on this host (a loopback address or a
socket: the test runs sharing it share this machine). Never this run's own.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
import secrets
import time
from collections.abc import Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import asyncpg

from turnstate.core._envelope import parse_envelope, serialize_envelope
from turnstate.storage import redact_dsn
from turnstate.storage._postgres_sql import from_pg_json, from_pg_text
from turnstate.storage._record_encoders import encode_audit, encode_context, encode_usage
from turnstate.storage._records import (
    decode_audit,
    decode_context,
    decode_parts,
    decode_path,
    decode_usage,
    encode_parts,
    encode_path,
    format_ts,
    utf8_safe,
)
from turnstate.storage._rows import CHAT_COLUMNS, MESSAGE_COLUMNS, TURN_COLUMNS

T = TypeVar("T")

DSN = os.environ.get("TURNSTATE_PG_DSN", "postgresql://postgres@127.0.0.1:5432/test")
STALE_SECONDS = 24 * 3600
"""A test schema named longer ago than this is a dead run's, whatever its name says."""
_BOOT_ID = "/proc/sys/kernel/random/boot_id"
_DIGITS = "0123456789abcdefghijklmnopqrstuvwxyz"
_NAME = re.compile(r"ts_test_(\d+)_h([0-9a-f]{6})_([0-9a-z]+)_([0-9a-z]+)(?:_.*)?\Z")
_OLD_NAME = re.compile(r"ts_test_(\d+)_[0-9a-f]{6}(?:_.*)?\Z")


def _base36(number: int) -> str:
    text = ""
    while True:
        number, digit = divmod(number, 36)
        text = _DIGITS[digit] + text
        if not number:
            return text


def host_boot() -> str | None:
    """Six hex digits naming this host's boot and PID namespace (a digest of the boot
    id and ``/proc/self/ns/pid``): where a pid means the same process. None without
    ``/proc``."""
    try:
        with open(_BOOT_ID, encoding="ascii") as file:
            boot = file.read().strip()
        namespace = os.readlink("/proc/self/ns/pid")
    except OSError:
        return None
    if not boot:
        return None
    return hashlib.sha256(f"{boot} {namespace}".encode()).hexdigest()[:6]


def process_start(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (``/proc/<pid>/stat`` field
    22), or None when no process has that pid (or there is no ``/proc``)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as file:
            stat = file.read()
    except OSError:
        return None
    fields = stat.rpartition(")")[2].split()  # the name (field 2) may hold spaces
    try:
        return int(fields[19])  # field 22, counting from the state (field 3)
    except (IndexError, ValueError):
        return None


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's: alive
        return True
    return True


def schema_name(pid: int, boot: str | None, start: int | None, made: float) -> str:
    """A run's schema name; the older form when the host tells no boot or start."""
    if boot is None or start is None:
        return f"ts_test_{pid}_{secrets.token_hex(3)}"
    return f"ts_test_{pid}_h{boot}_{_base36(start)}_{_base36(int(made))}"


SCHEMA = schema_name(os.getpid(), host_boot(), process_start(os.getpid()), time.time())
"""This test run's schema; every PostgresStore opened by the tests lives in it (or in a
schema named after it: ``SCHEMA + "_..."``), and the run drops them all at its end."""


def is_dead_run(name: str, *, boot: str | None, now: float, local_server: bool) -> bool:
    """Whether ``name`` is a test schema of a run that is provably gone (see the module).
    Never this run's own."""
    if name == SCHEMA or name.startswith(SCHEMA + "_"):
        return False
    match = _NAME.match(name)
    if match is not None:
        pid, made_by, start, made = (int(match[1]), match[2], int(match[3], 36),
                                     int(match[4], 36))
        if now - made > STALE_SECONDS:
            return True
        if boot is None or made_by != boot:  # another host's, or an earlier boot's
            return False
        return process_start(pid) != start
    old = _OLD_NAME.match(name)
    if old is None or not local_server or boot is None:
        return False
    return not _pid_alive(int(old[1]))


def server_is_local(dsn: str) -> bool:
    """Whether the DSN's server is on this host: a loopback address or a socket path."""
    from urllib.parse import parse_qs, urlsplit

    parts = urlsplit(dsn)
    host = parts.hostname or parse_qs(parts.query).get("host", [""])[0]
    return host in {"", "localhost", "::1"} or host.startswith(("127.", "/"))


async def drop_dead_schemas() -> list[str]:
    """Drop the schemas of test runs that are gone (``is_dead_run``); returns their
    names. A schema another run is dropping meanwhile, or whose locks do not come
    within a few seconds, is left for the next run."""
    conn = await asyncpg.connect(DSN, timeout=5)
    dropped = []
    try:
        await conn.execute("SET lock_timeout = '3s'")
        names = await conn.fetch(
            "SELECT nspname FROM pg_namespace WHERE nspname LIKE 'ts\\_test\\_%'")
        boot, now, local = host_boot(), time.time(), server_is_local(DSN)
        for (name,) in names:
            if not is_dead_run(name, boot=boot, now=now, local_server=local):
                continue
            try:
                await conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
            except asyncpg.PostgresError:
                continue
            dropped.append(name)
    finally:
        await conn.close()
    return dropped


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in {"1", "true", "yes"}


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to completion on a fresh loop in another thread (callable from a loop)."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()


def unreachable_reason() -> str | None:
    """None if the server answers, else why not (one line)."""

    async def probe() -> None:
        conn = await asyncpg.connect(DSN, timeout=5)
        await conn.close()

    try:
        run_sync(probe())
    except (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
        return f"PostgreSQL not reachable at {redact_dsn(DSN)} ({type(exc).__name__}: {exc})"
    return None


async def drop_test_schemas() -> None:
    conn = await asyncpg.connect(DSN, timeout=5)
    try:
        names = await conn.fetch("SELECT nspname FROM pg_namespace WHERE nspname = $1 "
                                 "OR nspname LIKE $1 || '\\_%'", SCHEMA)
        for (name,) in names:
            await conn.execute(f"DROP SCHEMA IF EXISTS {name} CASCADE")
    finally:
        await conn.close()


def _envelope_text(text: str) -> str:
    return utf8_safe(serialize_envelope(parse_envelope(text)))


_JSON: dict[str, Callable[[str], str]] = {
    "last_provider_state": _envelope_text,
    "last_context_state": lambda text: encode_context(decode_context(text)) or "",
    "parts": lambda text: encode_parts(decode_parts(text)),
    "provider_state": lambda text: encode_audit(decode_audit(text)) or "",
    "usage": lambda text: encode_usage(decode_usage(text)) or "",
    "path": lambda text: encode_path(decode_path(text)),
}
_COLUMNS = {"chats": (*CHAT_COLUMNS, "lease_epoch"), "messages": MESSAGE_COLUMNS,
            "turns": (*TURN_COLUMNS, "attached", "client_key")}
_ORDER = {"chats": "created_at, id", "messages": "chat_id, seq", "turns": "begun"}


def canonical_value(column: str, value: Any) -> Any:
    """A stored PostgreSQL value as the other stores write it: JSON through its type
    (``jsonb`` keeps neither key order nor spacing), times as fixed-width UTC text."""
    if value is None or isinstance(value, int):
        return value
    if column.endswith("_at"):
        return format_ts(value)
    if column in _JSON:
        return _JSON[column](from_pg_json(value))
    return from_pg_text(value)


async def canonical_rows(store: Any, table: str) -> list[dict[str, Any]]:
    """Every row of ``table`` in the other stores' stored form, column by column, in the
    order they were inserted (as SQLite's ``rowid`` gives them)."""
    columns = _COLUMNS[table]
    rows = await store.fetch_raw(f"SELECT {', '.join(columns)} FROM {table} "
                                 f"ORDER BY {_ORDER[table]}")
    return [{name: canonical_value(name, value) for name, value in zip(columns, row,
                                                                       strict=True)}
            for row in rows]
