"""SQLite store costs (DESIGN.md sections 4 and 9), against baselines of the same run.

Figures, all medians on WAL files with ``synchronous=NORMAL`` and foreign keys on:

* ``commit_turn`` through ``SqliteStore`` (serialisation, the version/lease check and
  all writes), in the store's default pattern (the whole transaction inline on the loop
  thread when the store's worker thread is idle) and as one function on that worker per
  transaction (the path taken when another process holds the lock);
* the same commit with one worker hop per statement (the other pattern), on the same
  connection and with the same serialisation;
* the baseline: plain ``sqlite3`` running the same SQL statements in one transaction,
  in one call, with the parameters already serialised (budget: the store at most 3x);
* ``begin_turn`` both ways and its plain ``sqlite3`` baseline;
* committed-history loads of 200 and 10,000 messages (rows decoded into ``Message``
  records), with a plain ``SELECT ... fetchall`` of the same rows for reference.

Then the PostgreSQL figures (``benchmarks/_postgres.py``): begin, commit and history
loads through ``PostgresStore`` against raw asyncpg, and turns/s of 4 processes x 25
chats on one database (skipped with a note when no server answers at
``TURNSTATE_PG_DSN``).

Run: ``python benchmarks/bench_storage.py``.
"""

from __future__ import annotations

import functools
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._postgres import postgres_main
from benchmarks._util import figure, ratio, run
from tests.storage.support import commit, start
from turnstate.core._conversation import TextPart
from turnstate.storage import SqliteStore, TurnLease
from turnstate.storage import _sqlite_sql as sql
from turnstate.storage._commit_columns import commit_columns
from turnstate.storage._migrations import migrate
from turnstate.storage._records import encode_parts, format_ts, message_ids

TURNS = 600
WARMUP = 60
NOW = "2026-01-31T12:00:00.000000Z"


def _median_us(samples: list[float]) -> float:
    return statistics.median(samples[WARMUP:]) / 1000


async def _timed(fn: Callable[[], Awaitable[Any]]) -> tuple[float, Any]:
    began = time.perf_counter_ns()
    result = await fn()
    return time.perf_counter_ns() - began, result


async def _each(store: SqliteStore, statement: str, params: tuple[Any, ...]) -> list[Any]:
    """One statement as one hop to the store's worker thread."""
    return await store._run(lambda conn: conn.execute(statement, params).fetchall())


async def _begin_awaits(store: SqliteStore, chat_id: str, turn_id: str) -> TurnLease:
    """``begin_turn``'s transaction with one await per statement (the rejected pattern)."""
    now = format_ts(store._clock())
    user_parts = encode_parts((TextPart(text="hello"),))
    user_id, assistant_id = message_ids(turn_id)
    await _each(store, "BEGIN IMMEDIATE", ())
    ((last_seq, epoch, *chat),) = await _each(store, sql.SELECT_FOR_BEGIN,
                                              (chat_id, chat_id))
    seq, version, epoch = last_seq + 1, chat[4], epoch + 1
    await _each(store, sql.INSERT_MESSAGES, (user_id, chat_id, seq, user_parts, now, now,
                                             assistant_id, chat_id, seq + 1, now, now))
    await _each(store, sql.INSERT_TURN, (turn_id, chat_id, user_id, assistant_id, seq,
                                         seq + 1, "openai", "gpt-4o", now))
    await _each(store, sql.TAKE_LEASE, (turn_id, "2026-01-31T12:10:00.000000Z", now, epoch,
                                        chat_id))
    await _each(store, "COMMIT", ())
    return TurnLease(chat_id=chat_id, turn_id=turn_id, user_message_id=user_id,
                     assistant_message_id=assistant_id, user_seq=seq, assistant_seq=seq + 1,
                     base_version=version, expires_at=store._clock(), epoch=epoch,
                     user_chars=5)


async def _commit_awaits(store: SqliteStore, lease: TurnLease) -> None:
    """``commit_turn``'s transaction with one await per statement (the rejected pattern)."""
    cols = commit_columns(commit(f"resp_{lease.turn_id}"))  # as the store does
    now = format_ts(store._clock())
    await _each(store, "BEGIN IMMEDIATE", ())
    rows = await _each(store, sql.COMMIT_CHAT, (
        cols.provider_state, cols.context, lease.assistant_seq, cols.chars, now, lease.chat_id,
        lease.base_version, lease.turn_id, lease.epoch))
    assert rows
    await store._run(lambda conn: sql.commit_messages(
        conn, cols, now, chat_id=lease.chat_id, seqs=(lease.user_seq, lease.assistant_seq),
        ids=(lease.user_message_id, lease.assistant_message_id)))
    await _each(store, sql.COMMIT_TURN, (cols.strategy, cols.path, now, lease.turn_id))
    await _each(store, "COMMIT", ())


async def _store_figures(path: Path) -> dict[str, float]:
    samples: dict[str, list[float]] = {name: [] for name in (
        "begin inline", "commit inline", "begin one hop", "commit one hop", "begin awaits",
        "commit awaits", "round trip", "sql in worker")}
    async with SqliteStore.open(path) as store:
        for pattern in ("inline", "one hop", "awaits"):
            chat_id = (await store.create_chat(owner="bench")).id
            store._inline_writes = pattern == "inline"
            for index in range(TURNS):
                turn = start(f"{pattern}-{index}")
                record = commit(f"resp_{index}")  # built outside the timed region
                one_hop = pattern != "awaits"
                took, lease = await _timed(functools.partial(
                    store.begin_turn, chat_id, turn) if one_hop else functools.partial(
                    _begin_awaits, store, chat_id, turn.turn_id))
                took_commit, _ = await _timed(functools.partial(
                    store.commit_turn, lease, record) if one_hop else functools.partial(
                    _commit_awaits, store, lease))
                samples[f"begin {pattern}"].append(took)
                samples[f"commit {pattern}"].append(took_commit)
        chat_id = (await store.create_chat(owner="bench")).id
        samples["sql in worker"] = await _sql_in_worker(store, chat_id)
        for _ in range(TURNS):
            took, _ = await _timed(lambda: store._run(lambda conn: None))
            samples["round trip"].append(took)
    return {name: _median_us(values) for name, values in samples.items()}


async def _sql_in_worker(store: SqliteStore, chat_id: str) -> list[float]:
    """The baseline's commit SQL run on the store's worker thread, timed inside it."""
    cols = commit_columns(commit("resp_1"))
    inside: list[float] = []

    def body(conn: sqlite3.Connection, lease: TurnLease) -> None:
        began = time.perf_counter_ns()
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(sql.COMMIT_CHAT, (cols.provider_state, cols.context, lease.assistant_seq,
                                       cols.chars, NOW, lease.chat_id, lease.base_version,
                                       lease.turn_id, lease.epoch)).fetchall()
        sql.commit_messages(conn, cols, NOW, chat_id=lease.chat_id,
                            seqs=(lease.user_seq, lease.assistant_seq),
                            ids=(lease.user_message_id, lease.assistant_message_id))
        conn.execute(sql.COMMIT_TURN, (cols.strategy, cols.path, NOW, lease.turn_id))
        conn.execute("COMMIT")
        inside.append(time.perf_counter_ns() - began)

    for index in range(TURNS):
        lease = await store.begin_turn(chat_id, start(f"inside-{index}"))
        await store._run(functools.partial(body, lease=lease))
    return inside


def _serialisation_us() -> float:
    record = commit("resp_1")
    samples = []
    for _ in range(TURNS):
        began = time.perf_counter_ns()
        commit_columns(record)
        samples.append(time.perf_counter_ns() - began)
    return _median_us(samples)


def _plain_connection(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA busy_timeout = 5000")
    conn.execute("PRAGMA foreign_keys = ON")
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    migrate(conn)
    return conn


def _plain_figures(path: Path) -> dict[str, float]:
    """The same SQL with plain sqlite3: one transaction, one call, parameters ready."""
    conn = _plain_connection(path)
    conn.execute("INSERT INTO chats (id, owner, created_at, updated_at) VALUES "
                 "('plain', 'bench', ?, ?)", (NOW, NOW))
    cols = commit_columns(commit("resp_plain"))
    parts = encode_parts((TextPart(text="hello"),))
    begins, commits = [], []
    for index in range(TURNS):
        turn_id = f"plain-{index}"
        user_id, assistant_id = message_ids(turn_id)
        seq = 2 * index + 1
        began = time.perf_counter_ns()
        conn.execute("BEGIN IMMEDIATE")
        epoch = conn.execute(sql.SELECT_FOR_BEGIN, ("plain", "plain")).fetchone()[1] + 1
        conn.execute(sql.INSERT_MESSAGES, (user_id, "plain", seq, parts, NOW, NOW,
                                           assistant_id, "plain", seq + 1, NOW, NOW))
        conn.execute(sql.INSERT_TURN, (turn_id, "plain", user_id, assistant_id, seq, seq + 1,
                                       "openai", "gpt-4o", NOW))
        conn.execute(sql.TAKE_LEASE, (turn_id, NOW, NOW, epoch, "plain"))
        conn.execute("COMMIT")
        middle = time.perf_counter_ns()
        conn.execute("BEGIN IMMEDIATE")
        assert conn.execute(sql.COMMIT_CHAT, (cols.provider_state, cols.context, seq + 1,
                                              cols.chars, NOW, "plain", index,
                                              turn_id, epoch)).fetchall()
        sql.commit_messages(conn, cols, NOW, chat_id="plain", seqs=(seq, seq + 1),
                            ids=(user_id, assistant_id))
        conn.execute(sql.COMMIT_TURN, (cols.strategy, cols.path, NOW, turn_id))
        conn.execute("COMMIT")
        end = time.perf_counter_ns()
        begins.append(middle - began)
        commits.append(end - middle)
    conn.close()
    return {"begin": _median_us(begins), "commit": _median_us(commits)}


def _fill_history(path: Path, chat_id: str, messages: int) -> None:
    # Bulk rows straight into the file (the store's own turns would take seconds to
    # write 10,000 messages; what is measured here is the read).
    conn = _plain_connection(path)
    conn.execute("INSERT INTO chats (id, owner, created_at, updated_at) VALUES (?, 'b', ?, ?)",
                 (chat_id, NOW, NOW))
    rows = [(f"{chat_id}-{seq}", chat_id, seq, "user" if seq % 2 else "assistant", "completed",
             encode_parts((TextPart(text=f"message {seq} " + "lorem ipsum " * 8),)),
             None, None, NOW, NOW) for seq in range(1, messages + 1)]
    conn.executemany("INSERT INTO messages VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
    conn.close()


async def _history_figures(path: Path) -> dict[int, tuple[float, float]]:
    results = {}
    for size in (200, 10_000):
        _fill_history(path, f"h{size}", size)
    async with SqliteStore.open(path) as store:
        for size, repeat in ((200, 200), (10_000, 15)):
            samples = []
            for _ in range(repeat + 3):
                took, history = await _timed(lambda s=size: store.load_history(f"h{s}"))
                assert len(history) == size
                samples.append(took)
            conn = sqlite3.connect(path)
            raw = []
            for _ in range(repeat + 3):
                began = time.perf_counter_ns()
                conn.execute(sql.SELECT_CHAT, (f"h{size}",)).fetchall()
                conn.execute("SELECT * FROM messages WHERE chat_id = ? AND status = "
                             "'completed' ORDER BY seq", (f"h{size}",)).fetchall()
                raw.append(time.perf_counter_ns() - began)
            conn.close()
            results[size] = (statistics.median(samples[3:]) / 1000,
                             statistics.median(raw[3:]) / 1000)
    return results


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        plain = _plain_figures(folder / "plain.db")
        store = await _store_figures(folder / "store.db")
        history = await _history_figures(folder / "history.db")
    serialisation = _serialisation_us()
    print(f"storage benchmark: {TURNS} turns per pattern, medians after {WARMUP} warm-up")
    figure("commit_turn, SqliteStore default (inline on the loop thread)",
           store["commit inline"])
    figure("commit_turn, one thread hop per transaction", store["commit one hop"])
    figure("commit_turn, one worker hop per statement", store["commit awaits"])
    figure("commit, plain sqlite3, same SQL, one call (baseline)", plain["commit"])
    ratio("commit_turn SqliteStore (inline) / plain sqlite3", store["commit inline"],
          plain["commit"], budget=3)
    ratio("commit_turn, one hop / plain sqlite3", store["commit one hop"], plain["commit"])
    ratio("commit, one await per statement / plain sqlite3", store["commit awaits"],
          plain["commit"])
    figure("  of which: one worker round trip (empty function)", store["round trip"])
    figure("  of which: commit serialisation (commit_columns)", serialisation)
    figure("  the baseline's SQL timed on the store's worker thread", store["sql in worker"])
    ratio("commit_turn without the round trip / plain sqlite3",
          store["commit one hop"] - store["round trip"], plain["commit"])
    figure("begin_turn, SqliteStore default (inline)", store["begin inline"])
    figure("begin_turn, one thread hop per transaction", store["begin one hop"])
    figure("begin_turn, one worker hop per statement", store["begin awaits"])
    figure("begin, plain sqlite3, same SQL, one call (baseline)", plain["begin"])
    ratio("begin_turn SqliteStore (inline) / plain sqlite3", store["begin inline"],
          plain["begin"])
    for size, (loaded, raw) in history.items():
        figure(f"load_history, {size:,} messages", loaded)
        figure(f"plain sqlite3 SELECT of the same {size:,} rows (no decoding)", raw)
        ratio(f"load_history / plain SELECT, {size:,} messages", loaded, raw)
    await postgres_main()


if __name__ == "__main__":
    run(main)
