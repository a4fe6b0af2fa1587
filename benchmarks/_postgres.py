"""PostgresStore figures for ``bench_storage.py`` (issue 14), against raw asyncpg.

* ``begin_turn`` and ``commit_turn`` through ``PostgresStore`` against the same SQL (the
  store's one function call) sent by raw asyncpg on one connection with the parameters
  already serialised (budget: commit at most 2x);
* the commit as one asyncpg await per statement inside a transaction (the pattern the
  server-side functions replace), for reference;
* ``load_history`` of 200 and 10,000 messages against a raw ``fetch`` of the same rows;
* turns/s (begin + commit, store level) of 4 processes x 25 chats on one database, and of
  1 process x 25 chats for the ratio.

The server is ``TURNSTATE_PG_DSN`` (default the local one); the figures go into their
own schema, dropped at the end. Run as a module (``python -m benchmarks._postgres
load ...``) it is one load process.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import statistics
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import asyncpg

from benchmarks._util import figure, ratio
from tests.storage.support import commit, start
from turnstate.core._conversation import TextPart
from turnstate.storage import PostgresStore, redact_dsn
from turnstate.storage import _postgres_sql as sql
from turnstate.storage._commit_columns import commit_columns
from turnstate.storage._records import encode_parts

DSN = os.environ.get("TURNSTATE_PG_DSN", "postgresql://postgres@127.0.0.1:5432/test")
ROOT = Path(__file__).resolve().parent.parent
TURNS, WARMUP = 400, 40
LOAD_TURNS_PER_CHAT = 8


def _median_us(samples: list[int]) -> float:
    return statistics.median(samples[WARMUP:]) / 1000


async def _store_turns(store: PostgresStore, chat_id: str) -> tuple[list[int], list[int]]:
    begins, commits = [], []
    for index in range(TURNS):
        turn, record = start(f"{chat_id}-{index}"), commit(f"resp_{index}")
        began = time.perf_counter_ns()
        lease = await store.begin_turn(chat_id, turn)
        middle = time.perf_counter_ns()
        await store.commit_turn(lease, record)
        begins.append(middle - began)
        commits.append(time.perf_counter_ns() - middle)
    return begins, commits


def _commit_params(chat_id: str, turn_id: str, version: int) -> tuple[Any, ...]:
    """The commit's parameters but the lease epoch, which begin returns (``_with_epoch``)."""
    cols = commit_columns(commit("resp_raw"))
    return (chat_id, turn_id, version, cols.parts, cols.audit, cols.usage, cols.provider_state,
            cols.context, cols.strategy, cols.path, None)


def _with_epoch(params: tuple[Any, ...], epoch: int) -> tuple[Any, ...]:
    """The fenced commit takes the lease epoch third, as ``PostgresStore.commit_turn`` does."""
    return (*params[:2], epoch, *params[2:])


async def _raw_turns(conn: asyncpg.Connection, chat_id: str) -> tuple[list[int], list[int]]:
    """The store's SQL by raw asyncpg: one call per write, parameters ready."""
    parts = encode_parts((TextPart(text="hello"),))
    lease = timedelta(seconds=600)
    begins, commits = [], []
    for index in range(TURNS):
        turn_id = f"raw-{index}"
        params = _commit_params(chat_id, turn_id, index)
        began = time.perf_counter_ns()
        began_row = await conn.fetchrow(sql.BEGIN_TURN, chat_id, turn_id, parts, "openai",
                                        "gpt-4o", None, lease, None)
        middle = time.perf_counter_ns()
        await conn.fetchrow(sql.COMMIT_TURN, *_with_epoch(params, began_row["epoch"]))
        begins.append(middle - began)
        commits.append(time.perf_counter_ns() - middle)
    return begins, commits


_AWAITS = (
    """UPDATE chats SET last_provider_state = $1, last_context_state = $2,
        active_turn_id = NULL, active_turn_expires_at = NULL, version = version + 1,
        updated_at = now() WHERE id = $3 AND version = $4 AND active_turn_id = $5
        RETURNING *""",
    """UPDATE messages SET status = 'completed', parts = $1, provider_state = $2, usage = $3,
        updated_at = now() WHERE id = $4 AND status = 'in_progress'""",
    """UPDATE messages SET status = 'completed', updated_at = now()
        WHERE id = $1 AND status = 'in_progress'""",
    """UPDATE turns SET status = 'completed', strategy = $1, path = $2, ended_at = now()
        WHERE id = $3""",
)


async def _awaits_commits(conn: asyncpg.Connection, chat_id: str) -> list[int]:
    """The commit as one await per statement in a transaction (the rejected pattern)."""
    parts = encode_parts((TextPart(text="hello"),))
    cols = commit_columns(commit("resp_awaits"))
    samples = []
    for index in range(TURNS):
        turn_id = f"awaits-{index}"
        await conn.fetchrow(sql.BEGIN_TURN, chat_id, turn_id, parts, "openai", "gpt-4o", None,
                            timedelta(seconds=600), None)
        began = time.perf_counter_ns()
        async with conn.transaction():
            assert await conn.fetchrow(_AWAITS[0], cols.provider_state, cols.context, chat_id,
                                       index, turn_id)
            await conn.execute(_AWAITS[1], cols.parts, cols.audit, cols.usage,
                               f"{turn_id}:assistant")
            await conn.execute(_AWAITS[2], f"{turn_id}:user")
            await conn.execute(_AWAITS[3], cols.strategy, cols.path, turn_id)
        samples.append(time.perf_counter_ns() - began)
    return samples


async def _fill_history(conn: asyncpg.Connection, chat_id: str, messages: int) -> None:
    await conn.execute("INSERT INTO chats (id, owner, created_at, updated_at) "
                       "VALUES ($1, 'b', now(), now())", chat_id)
    rows = [(f"{chat_id}-{seq}", chat_id, seq, "user" if seq % 2 else "assistant", "completed",
             encode_parts((TextPart(text=f"message {seq} " + "lorem ipsum " * 8),)))
            for seq in range(1, messages + 1)]
    await conn.executemany("INSERT INTO messages (id, chat_id, seq, role, status, parts, "
                           "created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, now(), "
                           "now())", rows)


async def _history(store: PostgresStore, conn: asyncpg.Connection) -> dict[int, tuple[float,
                                                                                       float]]:
    results = {}
    for size, repeat in ((200, 200), (10_000, 15)):
        await _fill_history(conn, f"h{size}", size)
        loads, raws = [], []
        for _ in range(repeat + 3):
            began = time.perf_counter_ns()
            assert len(await store.load_history(f"h{size}")) == size
            loads.append(time.perf_counter_ns() - began)
            began = time.perf_counter_ns()
            await conn.fetch(sql.SELECT_HISTORY, f"h{size}", None)
            raws.append(time.perf_counter_ns() - began)
        results[size] = (statistics.median(loads[3:]) / 1000, statistics.median(raws[3:]) / 1000)
    return results


async def _load(processes: int, chats: int, schema: str) -> float:
    """Turns per second of ``processes`` OS processes, each running ``chats`` chats at once."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    spawned = [await asyncio.create_subprocess_exec(
        sys.executable, "-m", "benchmarks._postgres", "load", schema, f"p{processes}-{n}",
        str(chats), cwd=ROOT, env=env, stdout=asyncio.subprocess.PIPE)
        for n in range(processes)]
    reports = [json.loads((await p.communicate())[0]) for p in spawned]
    began = min(r["began"] for r in reports)
    ended = max(r["ended"] for r in reports)
    return sum(r["turns"] for r in reports) / (ended - began)


async def _load_process(schema: str, name: str, chats: int) -> None:
    async with PostgresStore.open(DSN, schema=schema, pool_max=chats) as store:
        ids = [(await store.create_chat(owner=name, chat_id=f"{name}-{i}")).id
               for i in range(chats)]

        async def chat_turns(chat_id: str) -> None:
            for index in range(LOAD_TURNS_PER_CHAT):
                lease = await store.begin_turn(chat_id, start(f"{chat_id}-{index}"))
                await store.commit_turn(lease, commit(f"resp_{index}"))

        began = time.monotonic()
        await asyncio.gather(*map(chat_turns, ids))
        ended = time.monotonic()
    print(json.dumps({"turns": chats * LOAD_TURNS_PER_CHAT, "began": began, "ended": ended}))


async def postgres_main() -> None:
    schema = f"bench_{secrets.token_hex(4)}"
    try:
        conn = await asyncpg.connect(DSN, timeout=5)
    except (OSError, asyncpg.PostgresError) as exc:
        print(f"PostgreSQL figures skipped: {redact_dsn(DSN)} not reachable ({exc})")
        return
    try:
        async with PostgresStore.open(DSN, schema=schema, pool_max=2) as store:
            await conn.execute(f"SET search_path = {schema}")
            for chat in ("store", "raw", "awaits"):
                await store.create_chat(owner="bench", chat_id=chat)
            begins, commits = await _store_turns(store, "store")
            raw_begins, raw_commits = await _raw_turns(conn, "raw")
            awaits = await _awaits_commits(conn, "awaits")
            history = await _history(store, conn)
        four, one = await _load(4, 25, schema), await _load(1, 25, schema)
    finally:
        await conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        await conn.close()
    _report({"begin": _median_us(begins), "commit": _median_us(commits),
             "raw begin": _median_us(raw_begins), "raw commit": _median_us(raw_commits),
             "awaits": _median_us(awaits), "four": four, "one": one}, history)


def _report(us: dict[str, float], history: dict[int, tuple[float, float]]) -> None:
    print(f"\nPostgreSQL ({redact_dsn(DSN)}): {TURNS} turns, medians after {WARMUP} warm-up; "
          "a shared 2-core machine, so noisy")
    figure("commit_turn, PostgresStore (one function call)", us["commit"])
    figure("commit, raw asyncpg, same SQL, one call (baseline)", us["raw commit"])
    ratio("commit_turn PostgresStore / raw asyncpg", us["commit"], us["raw commit"], budget=2)
    figure("commit, raw asyncpg, one await per statement", us["awaits"])
    ratio("commit, one await per statement / one call", us["awaits"], us["raw commit"])
    figure("begin_turn, PostgresStore (one function call)", us["begin"])
    figure("begin, raw asyncpg, same SQL, one call (baseline)", us["raw begin"])
    ratio("begin_turn PostgresStore / raw asyncpg", us["begin"], us["raw begin"])
    for size, (loaded, raw) in history.items():
        figure(f"load_history PostgresStore, {size:,} messages", loaded)
        figure(f"raw asyncpg fetch of the same {size:,} rows (no decoding)", raw)
        ratio(f"load_history / raw fetch, {size:,} messages", loaded, raw)
    figure("turns/s, 4 processes x 25 chats, one database", us["four"], "turns/s")
    figure("turns/s, 1 process x 25 chats", us["one"], "turns/s")
    ratio("4 processes / 1 process", us["four"], us["one"])


if __name__ == "__main__":
    if sys.argv[1:2] == ["load"]:
        asyncio.run(_load_process(sys.argv[2], sys.argv[3], int(sys.argv[4])))
