"""SQLite specifics: pragmas, the schema and its constraints, migrations, transactions."""

from __future__ import annotations

import ast
import asyncio
import functools
import json
import sqlite3
import sys
import threading
from pathlib import Path

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.storage.support import ManualClock, abort, commit, committed_turn, envelope, start
from turnstate.core._context import part_chars
from turnstate.core._conversation import MessageStatus, TextPart
from turnstate.core._errors import ChatBusy, CommitConflict, StorageError
from turnstate.storage import LATEST_VERSION, MIGRATIONS, SqliteStore, TurnStatus, _sqlite_conn
from turnstate.storage import _sqlite_sql as q
from turnstate.storage._migrations import migrate, schema_version
from turnstate.storage._sqlite_conn import CHECKPOINT_BACKSTOP, CHECKPOINT_EVERY
from turnstate.storage._sqlite_log import EXPIRE_DOOMED
from turnstate.storage._turn_log import LoggedEvent

SCHEMA = {
    "chat_titles": ["chat_id", "title"],
    "chats": ["id", "owner", "created_at", "updated_at", "version", "last_provider_state",
              "last_context_state", "active_turn_id", "active_turn_expires_at",
              "committed_seq", "history_chars", "lease_epoch"],
    "lease_clock": ["boot_id", "offset_seconds"],
    "message_media": ["chat_id", "seq", "place", "data"],
    "owner_storage": ["owner", "used_bytes"],
    "storage_quota": ["id", "max_bytes"],
    "messages": ["id", "chat_id", "seq", "role", "status", "parts", "provider_state", "usage",
                 "created_at", "updated_at"],
    "schema_migrations": ["version"],
    "turn_event_batches": ["turn_id", "first_id", "last_id", "events"],
    "turn_logs": ["turn_id", "last_id", "truncated", "expired", "stop_requested_at"],
    "turns": ["id", "chat_id", "user_message_id", "assistant_message_id", "user_seq",
              "assistant_seq", "status", "provider", "model", "strategy", "reason", "detail",
              "path", "started_at", "ended_at", "attached", "client_key"],
}


async def test_file_database_pragmas(tmp_path: Path) -> None:
    """A file runs in WAL mode, synchronous NORMAL, with foreign keys and the busy timeout."""
    async with SqliteStore.open(tmp_path / "x.db", busy_timeout_ms=1234) as store:
        assert await store.fetch_raw("PRAGMA journal_mode") == [("wal",)]
        assert await store.fetch_raw("PRAGMA foreign_keys") == [(1,)]
        assert await store.fetch_raw("PRAGMA busy_timeout") == [(1234,)]
        assert await store.fetch_raw("PRAGMA synchronous") == [(1,)]


async def test_memory_database_has_foreign_keys_and_no_wal() -> None:
    """``:memory:`` works the same, except that WAL does not apply to it."""
    async with SqliteStore.open(":memory:") as store:
        assert await store.fetch_raw("PRAGMA journal_mode") == [("memory",)]
        assert await store.fetch_raw("PRAGMA foreign_keys") == [(1,)]


async def test_schema_is_exactly_the_design(tmp_path: Path) -> None:
    """The tables and their columns are those of DESIGN.md section 4 plus ``turns``, the
    chat's two history counters, its lease epoch, the turn-events log, chat titles and
    the lease clock's offset, the messages' media bytes and the owners' stored bytes."""
    async with SqliteStore.open(tmp_path / "x.db") as store:
        tables = await store.fetch_raw(
            "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
        assert [t for (t,) in tables] == sorted(SCHEMA)
        for table, columns in SCHEMA.items():
            info = await store.fetch_raw(f"PRAGMA table_info({table})")
            assert [row[1] for row in info] == columns


@pytest.mark.parametrize("statement", [
    "INSERT INTO messages VALUES ('m', 'c1', 9, 'user', 'done', '[]', NULL, NULL, 't', 't')",
    "INSERT INTO messages VALUES ('m', 'c1', 9, 'system', 'completed', '[]', NULL, NULL, 't', 't')",
    "INSERT INTO messages VALUES ('m', 'c1', 1, 'user', 'completed', '[]', NULL, NULL, 't', 't')",
    "INSERT INTO messages VALUES ('m', 'gh', 9, 'user', 'completed', '[]', NULL, NULL, 't', 't')",
    "UPDATE chats SET last_provider_state = '{\"mode\":\"stateless-loop\"}'",
    "UPDATE chats SET last_provider_state = '{\"loopMessages\":[]}'",
    "UPDATE messages SET provider_state = '{\"loopMessages\":[]}'",
    "UPDATE chats SET active_turn_id = 'x', active_turn_expires_at = NULL",
    "UPDATE turns SET status = 'finished'",
    "UPDATE turns SET chat_id = 'ghost'",
])
async def test_constraints_refuse_bad_rows(tmp_path: Path, statement: str) -> None:
    """Status and role checks, unique seqs, foreign keys and the loop-state checks hold."""
    path = tmp_path / "x.db"
    async with SqliteStore.open(path) as store:
        await store.create_chat(owner="alice", chat_id="c1")
        await committed_turn(store, "c1", "t1", cursor="resp_1")
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA foreign_keys = ON")
    with pytest.raises(sqlite3.IntegrityError):
        conn.execute(statement)
    conn.close()


async def test_migrations_are_recorded_once(tmp_path: Path) -> None:
    """Every migration is applied and recorded once; reopening applies nothing again."""
    path = tmp_path / "x.db"
    for _ in range(3):
        async with SqliteStore.open(path) as store:
            rows = await store.fetch_raw("SELECT version FROM schema_migrations ORDER BY 1")
            assert rows == [(v,) for v in range(1, len(MIGRATIONS) + 1)]
    conn = sqlite3.connect(path, isolation_level=None)
    assert migrate(conn) == () and schema_version(conn) == LATEST_VERSION
    conn.close()


async def test_version_one_database_upgrades_and_keeps_its_data(tmp_path: Path) -> None:
    """A database with only migration 1 gains the turns table and keeps its rows."""
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path, isolation_level=None)
    assert migrate(conn, target=1) == (1,)
    conn.execute("INSERT INTO chats VALUES ('c1', 'alice', '2026-01-01T00:00:00.000000Z', "
                 "'2026-01-01T00:00:00.000000Z', 3, NULL, NULL, NULL, NULL)")
    conn.execute("INSERT INTO messages VALUES ('m1', 'c1', 1, 'user', 'completed', "
                 "'[{\"text\":\"old\",\"type\":\"text\"}]', NULL, NULL, "
                 "'2026-01-01T00:00:00.000000Z', '2026-01-01T00:00:00.000000Z')")
    conn.close()
    async with SqliteStore.open(path, clock=ManualClock()) as store:
        assert await store.fetch_raw("SELECT max(version) FROM schema_migrations") == [
            (LATEST_VERSION,)]
        (message,) = await store.load_history("c1")
        assert message.text() == "old" and (await store.load_chat("c1")).version == 3
        lease = await store.begin_turn("c1", start("t1"))
        assert lease.user_seq == 2
        await store.commit_turn(lease, commit("resp_1"))
        assert (await store.load_turn("t1")).status == TurnStatus.COMPLETED


async def test_version_two_database_gains_counters_of_its_committed_history(
        tmp_path: Path) -> None:
    """Migration 3 fills ``committed_seq`` and ``history_chars`` from the stored history:
    completed messages only, NUL characters counted, an empty chat at None and 0."""
    path = tmp_path / "v2.db"
    conn = sqlite3.connect(path, isolation_level=None)
    assert migrate(conn, target=2) == (1, 2)
    ts = "'2026-01-01T00:00:00.000000Z'"
    for chat_id in ("c1", "empty"):
        conn.execute(f"INSERT INTO chats VALUES ('{chat_id}', 'alice', {ts}, {ts}, 1, NULL, "
                     "NULL, NULL, NULL)")
    rows = [("m1", 1, "user", "completed", [{"type": "text", "text": "a\u0000bc"}]),
            ("m2", 2, "assistant", "completed", [
                {"type": "tool_call", "callId": "c", "name": "nm", "arguments": "{}",
                 "provider": "", "model": "", "signature": None},
                {"type": "tool_result", "callId": "c", "name": "nm", "output": "out",
                 "isError": False},
                {"type": "continuation_transition", "reason": "model_changed",
                 "strategy": "replay", "sourceState": "validate", "recovered": True}]),
            ("m3", 3, "user", "aborted", [{"type": "text", "text": "never sent"}])]
    for message_id, seq, role, status, parts in rows:
        conn.execute(f"INSERT INTO messages VALUES (?, 'c1', ?, ?, ?, ?, NULL, NULL, {ts}, {ts})",
                     (message_id, seq, role, status, json.dumps(parts)))
    conn.close()
    async with SqliteStore.open(path) as store:
        chat = await store.load_chat("c1")
        assert (chat.committed_seq, chat.history_chars) == (2, 4 + 2 + 2 + 3)
        assert chat.history_chars == part_chars(
            [p for m in await store.load_history("c1") for p in m.parts])
        empty = await store.load_chat("empty")
        assert (empty.committed_seq, empty.history_chars) == (None, 0)


async def test_newer_schema_is_refused(tmp_path: Path) -> None:
    """A database migrated by a newer turnstate is refused instead of misread."""
    path = tmp_path / "new.db"
    conn = sqlite3.connect(path, isolation_level=None)
    migrate(conn)
    conn.execute("INSERT INTO schema_migrations VALUES (?)", (LATEST_VERSION + 1,))
    conn.close()
    with pytest.raises(StorageError, match="newer"):
        async with SqliteStore.open(path):
            pass


class _GatedStore(SqliteStore):
    """Pauses (or fails) its writer thread at one checkpoint."""

    pause_at = ""
    fail_at = ""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.reached = threading.Event()
        self.release = threading.Event()
        self.reached_inline = False

    def _checkpoint(self, name: str) -> None:
        if name == self.fail_at:
            raise RuntimeError(f"injected failure at {name}")
        if name == self.pause_at:
            self.reached.set()
            if threading.current_thread() is threading.main_thread():
                self.reached_inline = True  # a pause here would block the event loop
                return
            self.release.wait(timeout=30)


async def test_failed_transaction_rolls_back_whole(tmp_path: Path) -> None:
    """An error in the middle of a commit leaves nothing of it, and the store still works."""
    async with _GatedStore.open(tmp_path / "x.db", inline_writes=False) as store:
        await store.create_chat(owner="alice", chat_id="c1")
        lease = await store.begin_turn("c1", start("t1"))
        store.fail_at = "commit:messages"
        with pytest.raises(RuntimeError, match="injected"):
            await store.commit_turn(lease, commit("resp_1"))
        chat = await store.load_chat("c1")
        assert (chat.version, chat.last_provider_state, chat.active_turn_id) == (0, None, "t1")
        assert {m.status for m in await store.list_messages("c1")} == {
            MessageStatus.IN_PROGRESS}
        store.fail_at = ""
        assert (await store.commit_turn(lease, commit("resp_1"))).version == 1


async def test_readers_never_see_half_a_transaction(tmp_path: Path) -> None:
    """While a commit is paused mid-transaction, another connection sees the old state."""
    path = tmp_path / "x.db"
    async with _GatedStore.open(path, inline_writes=False) as store:
        await store.create_chat(owner="alice", chat_id="c1")
        lease = await store.begin_turn("c1", start("t1"))
        store.pause_at = "commit:turn"
        task = asyncio.ensure_future(store.commit_turn(lease, commit("resp_1")))
        await asyncio.to_thread(store.reached.wait, 30)
        reader = sqlite3.connect(path)
        assert reader.execute("SELECT version, last_provider_state FROM chats").fetchall() == [
            (0, None)]
        assert reader.execute("SELECT DISTINCT status FROM messages").fetchall() == [
            ("in_progress",)]
        store.release.set()
        assert (await task).version == 1
        assert reader.execute("SELECT version FROM chats").fetchall() == [(1,)]
        reader.close()


async def test_cancelled_commit_still_completes_atomically(tmp_path: Path) -> None:
    """Cancelling the awaiting task does not cut a transaction: it commits whole."""
    async with _GatedStore.open(tmp_path / "x.db", inline_writes=False) as store:
        await store.create_chat(owner="alice", chat_id="c1")
        lease = await store.begin_turn("c1", start("t1"))
        store.pause_at = "commit:messages"
        task = asyncio.ensure_future(store.commit_turn(lease, commit("resp_1")))
        await asyncio.to_thread(store.reached.wait, 30)
        task.cancel()
        store.release.set()
        with pytest.raises(asyncio.CancelledError):
            await task
        store.pause_at = ""
        chat = await store.load_chat("c1")
        assert (chat.version, chat.active_turn_id) == (1, None)
        assert (await store.load_turn("t1")).status == TurnStatus.COMPLETED


async def test_locked_database_raises_storage_error(tmp_path: Path) -> None:
    """A write blocked past the busy timeout by another process is a StorageError."""
    path = tmp_path / "x.db"
    async with SqliteStore.open(path, busy_timeout_ms=50) as store:
        await store.create_chat(owner="alice", chat_id="c1")
        other = sqlite3.connect(path, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")
        with pytest.raises(StorageError, match="locked"):
            await store.begin_turn("c1", start("t1"))
        other.execute("ROLLBACK")
        other.close()
        assert (await store.begin_turn("c1", start("t1"))).user_seq == 1


async def test_a_held_lock_moves_the_write_off_the_event_loop(tmp_path: Path) -> None:
    """When another process holds the write lock, the inline write path gives up at once
    and the transaction waits on the store's worker thread, then commits."""
    path = tmp_path / "x.db"
    async with SqliteStore.open(path) as store:
        await store.create_chat(owner="alice", chat_id="c1")
        other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        other.execute("BEGIN IMMEDIATE")
        task = asyncio.ensure_future(store.begin_turn("c1", start("t1")))
        await asyncio.sleep(0)  # let the task run up to its first await
        assert store._in_flight == 1 and not task.done()  # waiting on the worker thread
        await asyncio.to_thread(other.execute, "ROLLBACK")
        assert (await task).user_seq == 1
        other.close()


async def test_inline_operations_never_wait_and_worker_ones_do(tmp_path: Path) -> None:
    """Between operations the connection waits for no lock (what runs inline on the
    event loop's thread, a write or the chat read); what runs on the worker waits with
    the configured busy timeout."""
    async with SqliteStore.open(tmp_path / "x.db", busy_timeout_ms=1234) as store:
        await store.create_chat(owner="alice", chat_id="c1")
        await store.load_chat("c1")
        await committed_turn(store, "c1", "t1")
        conn = store._conn
        assert conn.execute("PRAGMA busy_timeout").fetchone() == (0,)
        assert await store.fetch_raw("PRAGMA busy_timeout") == [(1234,)]
        assert conn.execute("PRAGMA busy_timeout").fetchone() == (0,)


async def test_creating_a_chat_runs_inline_when_nothing_is_queued(tmp_path: Path) -> None:
    """``POST /api/chats`` costs no hop to the worker thread (issue 26: a third of the
    CPU of a hop), and a duplicate id is still refused with nothing written."""
    async with SqliteStore.open(tmp_path / "x.db") as store:
        hops: list[object] = []
        submit = store._worker.submit
        store._worker.submit = lambda job: (hops.append(job), submit(job))[1]  # type: ignore[method-assign]
        await store.create_chat(owner="alice", chat_id="c1")
        assert hops == []
        with pytest.raises(StorageError, match="already exists"):
            await store.create_chat(owner="bob", chat_id="c1")
        assert (await store.load_chat("c1")).owner == "alice"


async def test_two_stores_on_one_file_share_leases(tmp_path: Path) -> None:
    """Two processes' stores on one file see each other's leases and commits."""
    path = tmp_path / "x.db"
    async with SqliteStore.open(path) as first, SqliteStore.open(path) as second:
        await first.create_chat(owner="alice", chat_id="c1")
        lease = await first.begin_turn("c1", start("t1"))
        with pytest.raises(ChatBusy):
            await second.begin_turn("c1", start("t2"))
        await first.commit_turn(lease, commit("resp_1"))
        assert (await second.load_chat("c1")).version == 1


async def test_unopenable_path_raises_storage_error(tmp_path: Path) -> None:
    """A path that cannot be opened is a StorageError."""
    with pytest.raises(StorageError):
        async with SqliteStore.open(tmp_path / "missing-dir" / "x.db"):
            pass


async def test_a_cancelled_worker_write_still_keeps_inline_writes_off_the_connection(
        tmp_path: Path) -> None:
    """Issue 20: a task cancelled while its transaction is open on the worker thread must
    not let an inline transaction start on the same connection (SQLite would refuse it:
    "cannot start a transaction within a transaction", failing an unrelated chat's turn).
    Until the worker has finished, every other operation waits behind it.

    The chats are made by another store, so this one knows neither row and its begins are
    whole transactions (a begin on a chat the store wrote last is one statement, with no
    transaction open between its checkpoints); the pause is inside that transaction."""
    path = tmp_path / "x.db"
    async with SqliteStore.open(path) as setup:
        await setup.create_chat(owner="alice", chat_id="c1")
        await setup.create_chat(owner="alice", chat_id="c2")
    async with _GatedStore.open(path) as store:  # inline writes on
        other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        other.execute("BEGIN IMMEDIATE")  # the first write cannot go inline: worker
        store.pause_at = "begin:messages"
        first = asyncio.ensure_future(store.begin_turn("c1", start("t1")))
        await asyncio.sleep(0)
        await asyncio.to_thread(other.execute, "ROLLBACK")
        assert await asyncio.to_thread(store.reached.wait, 30)  # its transaction is open
        assert not store.reached_inline
        first.cancel()
        with pytest.raises(asyncio.CancelledError):
            await first
        second = asyncio.ensure_future(store.begin_turn("c2", start("t2")))
        await asyncio.sleep(0)
        store.pause_at = ""
        store.release.set()
        assert (await second).user_seq == 1  # it waited for the worker, then ran
        assert (await store.load_chat("c1")).active_turn_id == "t1"  # the first landed
        other.close()


async def test_a_message_window_is_read_off_the_indexes(tmp_path: Path) -> None:
    """``load_messages`` never scans a chat or sorts it: each statement searches an index
    (issue 25, defect 9), so its cost does not grow with the chat's length."""
    async with SqliteStore.open(tmp_path / "x.db") as store:
        for sql, params in ((q.WINDOW_BEFORE, ("c", 10, 5)), (q.WINDOW_AFTER, ("c", 0, 5)),
                            (q.COUNT_MESSAGES, ("c",)),
                            (q.WINDOW_TURNS.format(turns="?, ?", answers="?, ?"),
                             ("a", "b", "a:assistant", "b:assistant"))):
            plan = " ".join(str(row[-1]) for row in
                            await store.fetch_raw(f"EXPLAIN QUERY PLAN {sql}", params))
            assert plan.startswith("SEARCH") and "INDEX" in plan, (sql, plan)
            assert "SCAN" not in plan and "TEMP B-TREE" not in plan, (sql, plan)


@pytest.mark.parametrize("sql", [
    q.SELECT_FOR_TRANSITION, q.SET_PARTS, q.SELECT_USER_PARTS, q.COMMIT_MESSAGES,
    q.ABORT_USER, q.ABORT_ASSISTANT, q.SELECT_TURN_SEQS, q.RECLAIM_MESSAGES, q.COMMIT_TURN,
    q.MARK_RECLAIMED, q.BILL_RECLAIMED,
    q.INSERT_TURN, q.INSERT_MESSAGES, q.SELECT_FOR_BEGIN, q.TAKE_LEASE, q.COMMIT_CHAT,
    q.TURN_RECORDED])
async def test_a_turns_statements_search_by_key(tmp_path: Path, sql: str) -> None:
    """Schema version 7 has no index on a message's id: every statement of a turn finds
    its messages by ``(chat_id, seq)`` and its turn and chat by their keys."""
    async with SqliteStore.open(tmp_path / "x.db") as store:
        plan = [str(row[-1]) for row in await store.fetch_raw(
            f"EXPLAIN QUERY PLAN {sql}", ("x",) * sql.count("?"))]
    assert not any(step.startswith("SCAN") and "CONSTANT ROWS" not in step
                   for step in plan), plan


@pytest.mark.parametrize("sql", [
    q.SELECT_FOR_BEGIN, q.INSERT_MESSAGES, q.INSERT_TURN, q.TAKE_LEASE, q.COMMIT_LEASED_CHAT,
    q.COMMIT_MESSAGES, q.COMMIT_TURN, q.BEGIN_KNOWN, q.COMMIT_KNOWN])
async def test_a_cursor_turns_statements_build_no_temporary_btree(tmp_path: Path,
                                                                 sql: str) -> None:
    """Schema version 9 states the status checks as comparisons (an ``IN`` list of three
    constants built a temporary b-tree each time a status was written: six times a
    turn), begin takes the lease without ``RETURNING`` (which collects its rows in one)
    the commit finds its two messages by a range of seqs (``seq IN (?, ?)`` built one of
    the two values), and the commit of a lease carrying begin's chat returns no row.
    The one-statement begin's trigger inserts its two messages one row at a time: a
    trigger's multi-row ``VALUES`` is first copied into a temporary b-tree (an ``EXPLAIN``
    of the statement lists its trigger's program)."""
    async with SqliteStore.open(tmp_path / "x.db") as store:
        program = [row[1] for row in await store.fetch_raw(
            f"EXPLAIN {sql}", ("x",) * sql.count("?"))]
    assert "OpenEphemeral" not in program


async def test_a_commit_builds_the_chat_begin_handed_over(tmp_path: Path) -> None:
    """A commit of a lease that carries begin's chat updates it without ``RETURNING`` and
    returns that chat with the commit's columns: what ``load_chat`` reads after."""
    async with SqliteStore.open(tmp_path / "x.db") as store:
        await store.create_chat(owner="alice", chat_id="c1")
        await committed_turn(store, "c1", "t1", cursor="resp_1", text="first")
        lease = await store.begin_turn("c1", start("t2", "again"))
        statements: list[str] = []
        store._conn.set_trace_callback(statements.append)
        try:
            chat = await store.commit_turn(lease, commit("resp_2"))
        finally:
            store._conn.set_trace_callback(None)
        assert not any("RETURNING" in sql for sql in statements)
        assert chat == await store.load_chat("c1")


@pytest.mark.parametrize("change", [
    "no chat on the lease", "history_chars moved without a version bump", "version bumped"])
async def test_a_commit_the_leased_chat_does_not_describe_takes_the_returning_update(
        tmp_path: Path, change: str) -> None:
    """Without begin's chat on the lease, or with a chat row the lease's no longer
    describes, the commit runs the update that returns the row: the chat it returns is
    the stored one (a moved counter the guard does not cover is kept, not overwritten),
    and a bumped version is still a conflict."""
    async with SqliteStore.open(tmp_path / "x.db") as store:
        await store.create_chat(owner="alice", chat_id="c1")
        lease = await store.begin_turn("c1", start("t1"))
        if change == "no chat on the lease":
            lease = attrs.evolve(lease, chat=None)
        elif change == "history_chars moved without a version bump":
            await store.fetch_raw("UPDATE chats SET history_chars = 100")
        else:
            await store.fetch_raw("UPDATE chats SET version = version + 1")
            with pytest.raises(CommitConflict):
                await store.commit_turn(lease, commit("resp_1"))
            return
        chat = await store.commit_turn(lease, commit("resp_1"))
        assert chat == await store.load_chat("c1") and chat.version == 1
        if change != "no chat on the lease":
            assert chat.history_chars == 100 + part_chars(start("t1").user_parts) + 2


@settings(max_examples=40, deadline=None)
@given(kind=st.sampled_from(["cursor", "none", "blank"]), user=st.text(max_size=20),
       reply=st.text(max_size=20), renewed=st.booleans(), turns=st.integers(0, 2))
def test_a_commit_builds_the_chat_the_returning_update_returns(
        kind: str, user: str, reply: str, renewed: bool, turns: int) -> None:
    """The commit that builds the chat from the lease (``COMMIT_LEASED_CHAT``) and the one
    that reads it back (``COMMIT_CHAT``, taken for a lease without a chat) return the same
    record, on two stores with one clock, whatever came before in the chat."""
    async def run() -> None:
        clock = ManualClock()
        async with (SqliteStore.open(":memory:", clock=clock) as built,
                    SqliteStore.open(":memory:", clock=clock) as returned):
            outcomes = []
            for store, keep in ((built, True), (returned, False)):
                await store.create_chat(owner="alice", chat_id="c1")
                for index in range(turns):
                    await committed_turn(store, "c1", f"t{index}", cursor=f"resp_{index}")
                lease = await store.begin_turn("c1", start("t", user))
                if renewed:
                    await store.renew_lease(lease, 60)
                lease = lease if keep else attrs.evolve(lease, chat=None)
                cursor = None if kind == "none" else "resp_x"
                changes = {"provider_state": envelope(" ")} if kind == "blank" else {}
                outcomes.append(await store.commit_turn(lease, commit(
                    cursor, parts=(TextPart(text=reply),), **changes)))
                assert outcomes[-1] == await store.load_chat("c1")
            assert outcomes[0] == outcomes[1]

    asyncio.run(run())


async def test_the_status_checks_are_the_same_rule(tmp_path: Path) -> None:
    """Version 9's status checks take the three statuses and refuse anything else, on
    both tables, as the ``IN`` lists before did (NULL is refused by ``NOT NULL``)."""
    async with SqliteStore.open(tmp_path / "x.db") as store:
        await store.create_chat(owner="alice", chat_id="c1")
        await committed_turn(store, "c1", "t1")
    conn = sqlite3.connect(tmp_path / "x.db", isolation_level=None)
    for table in ("turns", "messages"):
        (sql,) = conn.execute("SELECT sql FROM sqlite_master WHERE name = ?",
                              (table,)).fetchone()
        assert "status IN" not in sql
        for status in ("in_progress", "completed", "aborted"):
            conn.execute(f"UPDATE {table} SET status = ?", (status,))
        for status in ("done", "Completed", "completed ", "", None, 1):
            with pytest.raises(sqlite3.IntegrityError):
                conn.execute(f"UPDATE {table} SET status = ?", (status,))
    conn.close()


async def test_a_deleted_messages_turn_is_found_by_its_key(tmp_path: Path) -> None:
    """The trigger of schema version 6 updates the turn found by its primary key, as the
    foreign keys it replaced did through their indexes (no scan of the turns)."""
    async with SqliteStore.open(tmp_path / "x.db") as store:
        (trigger,) = await store.fetch_raw(
            "SELECT sql FROM sqlite_master WHERE name = 'messages_leave_turns'")
        body = trigger[0].split(" BEGIN", 1)[1].rsplit("END", 1)[0]
        for update in filter(str.strip, body.split(";")):
            sql = update.replace("old.id", "?")
            plan = await store.fetch_raw(f"EXPLAIN QUERY PLAN {sql}",
                                         ("t:user",) * update.count("old.id"))
            assert [row[-1] for row in plan] == [
                "SEARCH turns USING INDEX sqlite_autoindex_turns_1 (id=?)"], plan


def test_the_store_reaches_into_no_library() -> None:
    """Issue 20: the SQLite store used aiosqlite's private ``_execute``, ``_conn`` and
    ``_thread``. It now runs its own worker over the standard library's ``sqlite3``: its
    modules import nothing but the standard library and turnstate, so no library's
    private attribute is within reach."""
    package = Path(q.__file__).parent
    imported: set[str] = set()
    for path in sorted(package.glob("_sqlite*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                imported |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                imported.add(node.module.split(".")[0])
    foreign = imported - set(sys.stdlib_module_names) - {"turnstate", "__future__"}
    assert foreign == set(), foreign


async def test_the_log_expiry_sweep_reads_the_unexpired_logs_not_every_turn(
        tmp_path: Path) -> None:
    """``turn_log.expire`` reads the kept batches' turns off their index and the
    unexpired headers off ``turn_logs_unexpired``, and finds each log's turn by its key
    (issue 26): it scanned the whole ``turns`` table, every turn ever run, each sweep."""
    async with SqliteStore.open(tmp_path / "x.db") as store:
        rows = await store.fetch_raw(f"EXPLAIN QUERY PLAN {EXPIRE_DOOMED}", ("t", "t"))
        plan = [str(row[-1]) for row in rows]
    assert "SCAN turn_event_batches USING COVERING INDEX turn_event_batches_by_turn" in plan
    assert "SCAN l USING INDEX turn_logs_unexpired" in plan, plan
    scans = {step for step in plan if step.startswith("SCAN ")}
    assert scans <= {"SCAN turn_event_batches USING COVERING INDEX turn_event_batches_by_turn",
                     "SCAN b", "SCAN l USING INDEX turn_logs_unexpired"}, plan
    assert plan.count("SEARCH t USING INDEX sqlite_autoindex_turns_1 (id=?)") == 2, plan


async def test_checkpoints_run_on_the_worker_not_in_an_inline_commit(tmp_path: Path) -> None:
    """Every ``CHECKPOINT_EVERY`` writes the worker thread checkpoints the WAL into the
    file from a connection of its own; the store's connection keeps only a backstop
    interval (issue 26): SQLite's automatic checkpoint at 1,000 pages ran inside an
    inline ``COMMIT`` on the event loop's thread, a 1-4 ms stall every few dozen turns."""
    path = tmp_path / "x.db"
    async with SqliteStore.open(path) as store:
        assert await store.fetch_raw("PRAGMA wal_autocheckpoint") == [(CHECKPOINT_BACKSTOP,)]
        before = path.stat().st_size
        for _ in range(CHECKPOINT_EVERY - 1):
            await store.create_chat(owner="o")
        await store._worker.call(lambda: None)  # whatever was queued there has run
        assert path.stat().st_size == before  # nothing checkpointed yet
        await store.create_chat(owner="o")
        await store._worker.call(lambda: None)
        assert path.stat().st_size > before  # the tables are in the file now
        chats = await store.list_chats("o")
    assert len(chats) == CHECKPOINT_EVERY


async def test_a_store_in_worker_mode_keeps_sqlites_own_checkpoints(tmp_path: Path) -> None:
    """Without inline writes every transaction already runs on the worker: no change."""
    async with SqliteStore.open(tmp_path / "x.db", inline_writes=False) as store:
        assert await store.fetch_raw("PRAGMA wal_autocheckpoint") == [(1000,)]


async def test_background_checkpoints_run_on_the_stores_connection(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The worker checkpoints on the store's own connection, between two operations:
    no connection is opened for it (issue 26: a new one per checkpoint cost about a
    third of each checkpoint, and one of its own raced the inline writes)."""
    opened: list[sqlite3.Connection] = []
    real_connect = sqlite3.connect

    def connect(*args: object, **kwargs: object) -> sqlite3.Connection:
        conn = real_connect(*args, **kwargs)  # type: ignore[arg-type]
        opened.append(conn)
        return conn

    monkeypatch.setattr(sqlite3, "connect", connect)
    async with SqliteStore.open(tmp_path / "x.db") as store:
        for _ in range(3 * CHECKPOINT_EVERY):
            await store.create_chat(owner="o")
        await store._worker.call(lambda: None)
        assert len(opened) == 1
        await store.create_chat(owner="o")  # the first write after a whole checkpoint
        ((_, frames, copied),) = await store.fetch_raw("PRAGMA wal_checkpoint(PASSIVE)")
        assert frames == copied < 10  # it started the WAL over


def _wal_restarts(path: Path) -> int:
    """The WAL header's checkpoint sequence number: one more at each restart of the WAL."""
    header = path.with_name(path.name + "-wal").read_bytes()[:16]
    return int.from_bytes(header[12:16], "big")


async def test_the_worker_starts_the_wal_over_after_a_whole_checkpoint(tmp_path: Path) -> None:
    """A background checkpoint that copied the whole WAL also starts it over, on the
    worker: the first write after it would otherwise write the WAL's header and sync it
    (``fdatasync``) inside an inline ``COMMIT`` on the event loop's thread (issue 26)."""
    path = tmp_path / "x.db"
    async with SqliteStore.open(path) as store:
        for _ in range(CHECKPOINT_EVERY - 1):
            await store.create_chat(owner="o")
        before = _wal_restarts(path)
        await store.create_chat(owner="o", chat_id="last")  # the write that queues it
        await store._worker.call(lambda: None)
        assert store._in_flight == 0
        assert _wal_restarts(path) == before + 1  # before any further write
        assert await store.fetch_raw("PRAGMA user_version") == [(0,)]
        assert (await store.load_chat("last")).id == "last"


@pytest.mark.parametrize("carries_chat", [True, False])
async def test_a_commit_completes_both_messages_in_one_statement(
        tmp_path: Path, carries_chat: bool) -> None:
    """A commit completes both messages with one ``UPDATE`` (issue 26: the user's and the
    assistant's were two). A lease carrying begin's chat commits in one statement, whose
    trigger runs the chat's, the messages' and the turn's updates (``COMMIT_KNOWN``);
    any other lease takes the transaction of four statements between BEGIN and COMMIT."""
    async with SqliteStore.open(tmp_path / "x.db") as store:
        await store.create_chat(owner="alice", chat_id="c1")
        lease = await store.begin_turn("c1", start("t1"))
        lease = lease if carries_chat else attrs.evolve(lease, chat=None)
        statements: list[str] = []
        store._conn.set_trace_callback(statements.append)
        try:
            await store.commit_turn(lease, commit("resp_1"))
        finally:
            store._conn.set_trace_callback(None)
        sql = [" ".join(s.split()) for s in statements if not s.startswith("PRAGMA")]
        if carries_chat:
            assert {s.split(" VALUES ")[0] for s in sql} == {
                " ".join(q.COMMIT_KNOWN.split()).split(" VALUES ")[0]}, sql
            ((trigger,),) = await store.fetch_raw(
                "SELECT sql FROM sqlite_temp_master WHERE name = 'turn_commits_write'")
            assert [line.split()[:2] for line in trigger.splitlines()
                    if line.split()[:1] == ["UPDATE"]] == [
                ["UPDATE", "chats"], ["UPDATE", "messages"], ["UPDATE", "turns"]]
        else:
            assert [s.split()[0] for s in sql] == [
                "BEGIN", "UPDATE", "UPDATE", "UPDATE", "COMMIT"]
        assert [m.status for m in await store.list_messages("c1")] == [
            MessageStatus.COMPLETED, MessageStatus.COMPLETED]


@pytest.mark.parametrize("version", [5, 7])
async def test_version_five_database_loses_the_message_id_indexes_and_keeps_its_rows(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, version: int) -> None:
    """Migration 6 rebuilds ``turns`` without its keys to ``messages`` (and their two
    indexes), migration 7 ``messages`` without the key on its id, migration 9 both with
    their status checks as comparisons: the rows keep their order, the turns' logs are
    not cascaded away by a rebuild, deleting a message still sets its id to NULL on the
    turn, and turns run on (from a version 5 file and from a version 7 one)."""
    path = tmp_path / f"v{version}.db"
    monkeypatch.setattr(_sqlite_conn, "migrate", functools.partial(migrate, target=version))
    async with SqliteStore.open(path) as store:
        await store.create_chat(owner="alice", chat_id="c1")
        for turn_id in ("t2", "t1", "t3"):  # rowid order is not id order
            await committed_turn(store, "c1", turn_id, cursor=f"resp_{turn_id}")
        await store.fetch_raw("INSERT INTO turn_logs (turn_id, last_id) VALUES ('t1', 1)")
        await store.fetch_raw("INSERT INTO turn_events VALUES ('t1', 1, 'text_delta', '{}')")
    monkeypatch.undo()
    async with SqliteStore.open(path) as store:
        assert await store.fetch_raw("SELECT max(version) FROM schema_migrations") == [
            (LATEST_VERSION,)]
        indexes = {name for (name,) in await store.fetch_raw(
            "SELECT name FROM sqlite_master WHERE type = 'index'")}
        assert indexes == {"sqlite_autoindex_turns_1", "turns_by_chat",
                           "sqlite_autoindex_messages_1",  # UNIQUE (chat_id, seq)
                           "chats_by_owner", "chats_by_lease_expiry",
                           "sqlite_autoindex_chats_1", "turn_logs_unexpired",
                           "sqlite_autoindex_turn_logs_1", "turn_event_batches_by_turn",
                           "sqlite_autoindex_chat_titles_1",
                           "sqlite_autoindex_lease_clock_1",
                           "sqlite_autoindex_message_media_1",  # (chat_id, seq, place)
                           "turns_client_key"}  # version 15
        assert [m.id for m in await store.list_messages("c1")] == [
            "t2:user", "t2:assistant", "t1:user", "t1:assistant", "t3:user", "t3:assistant"]
        assert [t.id for t in await store.list_turns("c1")] == ["t3", "t1", "t2"]
        page = await store.turn_log.read("c1", "t1", after=0, limit=10)
        assert [event.id for event in page.events] == [1]
        await store.delete_messages_from("c1", 3)  # t1's messages
        assert await store.fetch_raw(_MESSAGE_IDS) == [
            ("t2", "t2:user", "t2:assistant"), ("t1", None, None),
            ("t3", None, None)]  # t3's were after t1's
        lease = await store.begin_turn("c1", start("t4"))
        await store.commit_turn(lease, commit("resp_4"))
        assert [t.id for t in await store.list_turns("c1")] == ["t4", "t3", "t1", "t2"]


_MESSAGE_IDS = "SELECT id, user_message_id, assistant_message_id FROM turns ORDER BY rowid"


async def test_version_seven_logs_move_to_one_row_per_batch_and_read_the_same(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Migration 8 stores the turn-events log one row per write (``turn_event_batches``):
    a version 7 file's events (one row each) read back equal, headers keep their marks,
    appends and the cascade go on."""
    path = tmp_path / "v7.db"
    monkeypatch.setattr(_sqlite_conn, "migrate", functools.partial(migrate, target=7))
    datas = ['{"text":"a \\"quoted\\" é中","type":"text_delta"}', "{}",
             '{"text":"x","type":"text_delta"}']
    async with SqliteStore.open(path) as store:
        await store.create_chat(owner="alice", chat_id="c1")
        for turn_id in ("t1", "t2"):
            await committed_turn(store, "c1", turn_id, cursor=f"resp_{turn_id}")
        lease = await store.begin_turn("c1", start("t3"))
        for turn_id, ids in (("t1", (1, 2, 3)), ("t2", (5,)), ("t3", (1, 2))):
            await store.fetch_raw("INSERT INTO turn_logs (turn_id, last_id, truncated, "
                                  "stop_requested_at) VALUES (?, ?, ?, ?)",
                                  (turn_id, ids[-1], int(turn_id == "t2"),
                                   "2026-01-01T00:00:00.000000Z" if turn_id == "t3" else None))
            for index in ids:
                await store.fetch_raw("INSERT INTO turn_events VALUES (?, ?, ?, ?)",
                                      (turn_id, index, "text_delta", datas[index % 3]))
    monkeypatch.undo()
    async with SqliteStore.open(path) as store:
        log = store.turn_log
        assert await store.fetch_raw("SELECT max(version) FROM schema_migrations") == [
            (LATEST_VERSION,)]  # and version 9's rebuild of turns kept the logs
        tables = {name for (name,) in await store.fetch_raw(
            "SELECT name FROM sqlite_master WHERE type = 'table'")}
        assert "turn_events" not in tables
        page = await log.read("c1", "t1")
        assert page.events == tuple(LoggedEvent(i, "text_delta", datas[i % 3]) for i in (1, 2, 3))
        assert page.last_id == 3 and not page.truncated and not page.stop_requested
        assert [e.id for e in (await log.read("c1", "t1", after=1, limit=1)).events] == [2]
        page = await log.read("c1", "t2")
        assert page.truncated and [e.id for e in page.events] == [5]
        assert (await log.read("c1", "t3")).stop_requested
        assert await log.stop_requests(["t1", "t2", "t3"]) == {"t3"}
        await log.append("t3", [LoggedEvent(3, "text_delta", "{}"),
                                LoggedEvent(4, "turn_aborted", "{}")])
        assert [e.id for e in (await log.read("c1", "t3", after=1)).events] == [2, 3, 4]
        await store.abort_turn(lease, abort("cancelled"))
        await store.delete_chat("c1")
        for table in ("turn_event_batches", "turn_logs"):
            assert await store.fetch_raw(f"SELECT count(*) FROM {table}") == [(0,)]


@pytest.mark.parametrize("turn_id", ["t\u00e9\u4e2d", "t\x00nul", "x:user"])
async def test_deleting_a_message_clears_it_on_its_turn_whatever_the_turn_id(
        tmp_path: Path, turn_id: str) -> None:
    """The trigger that replaced the foreign keys finds the turn from the message id by
    bytes: multi-byte characters, a NUL (where SQLite's ``length`` of a text stops) and
    an id that itself ends like a message id."""
    async with SqliteStore.open(tmp_path / "x.db") as store:
        await store.create_chat(owner="alice", chat_id="c1")
        await committed_turn(store, "c1", "other")
        await committed_turn(store, "c1", turn_id)
        await store.delete_message("c1", 4)
        assert await store.fetch_raw(_MESSAGE_IDS) == [
            ("other", "other:user", "other:assistant"), (turn_id, f"{turn_id}:user", None)]
        await store.delete_message("c1", 3)
        assert (await store.fetch_raw(_MESSAGE_IDS))[1] == (turn_id, None, None)
        window = await store.load_messages("c1", limit=10)
        assert [t.id for t in window.turns] == ["other"]


async def test_a_cursor_turn_writes_at_most_fourteen_pages(tmp_path: Path) -> None:
    """Each page a transaction changes is one WAL frame (a write and a checksum at
    COMMIT): a cursor turn's begin and commit, counted with checkpoints off over 50 turns
    on 10 chats (issue 26: 17.1 a turn on schema version 5, 15.1 on version 6, which
    dropped the two indexes on the turn's message ids, 13.6 on version 7, which dropped
    the index of the messages' ids)."""
    async with SqliteStore.open(tmp_path / "x.db", inline_writes=False,
                                clock=ManualClock()) as store:
        await store.fetch_raw("PRAGMA wal_autocheckpoint = 0")
        for index in range(10):
            await store.create_chat(owner="o", chat_id=f"c{index}")
        for index in range(250):
            if index == 200:  # warmed: an empty WAL from here
                await store.fetch_raw("PRAGMA wal_checkpoint(TRUNCATE)")
            lease = await store.begin_turn(f"c{index % 10}", start(f"turn-{index:04d}"))
            await store.commit_turn(lease, commit(f"resp_{index}"))
        ((_, frames, _),) = await store.fetch_raw("PRAGMA wal_checkpoint(PASSIVE)")
    assert frames / 50 <= 14, frames / 50


async def test_under_a_steady_stream_of_turns_the_wal_starts_over_at_each_checkpoint(
        tmp_path: Path) -> None:
    """A background checkpoint every ``CHECKPOINT_EVERY`` writes (one per 128 cursor
    turns: every 32 cost the worker 30 us a turn, every 128 13 us), run between two of the
    store's operations, so it copies the whole WAL and the next write starts the WAL over:
    the file never grows past one interval's pages. A checkpoint on a connection of its
    own raced the inline writes of turns run back to back, never caught up, and the WAL
    grew to the backstop (4,000 pages), where SQLite checkpointed inside an inline
    ``COMMIT`` on the event loop's thread (issue 26)."""
    path, wal = tmp_path / "x.db", tmp_path / "x.db-wal"
    checkpoints: list[int] = []

    class Counting(SqliteStore):
        def _background_checkpoint(self) -> None:
            checkpoints.append(len(checkpoints))
            super()._background_checkpoint()

    async with Counting.open(path, clock=ManualClock()) as store:
        await store.create_chat(owner="o", chat_id="c1")
        for index in range(600):
            lease = await store.begin_turn("c1", start(f"turn-{index:04d}"))
            await store.commit_turn(lease, commit(f"resp_{index}"))
        await store._worker.call(lambda: None)
        wal_pages = (wal.stat().st_size - 32) // (4096 + 24)
    assert len(checkpoints) == 1201 // CHECKPOINT_EVERY == 4
    assert wal_pages < CHECKPOINT_BACKSTOP * 0.6, wal_pages


async def test_an_append_writes_one_row_per_batch_and_no_header(tmp_path: Path) -> None:
    """Schema 8 (issue 26): a batch of events is one row of ``turn_event_batches``, and
    a plain append writes no ``turn_logs`` header (it was a header upsert and one row per
    event); a truncation writes the header that remembers it."""
    async with SqliteStore.open(tmp_path / "x.db") as store:
        await store.create_chat(owner="alice", chat_id="c1")
        await store.begin_turn("c1", start("t1"))
        log = store.turn_log
        await log.append("t1", [LoggedEvent(i, "text_delta", "{}") for i in (1, 2, 3)])
        await log.append("t1", [LoggedEvent(4, "text_delta", "{}")])
        assert await store.fetch_raw(
            "SELECT first_id, last_id FROM turn_event_batches ORDER BY last_id") == [
            (1, 3), (4, 4)]
        assert await store.fetch_raw("SELECT count(*) FROM turn_logs") == [(0,)]
        assert (await log.read("c1", "t1")).last_id == 4
        await log.append("t1", [], truncate=True)
        assert await store.fetch_raw("SELECT last_id, truncated FROM turn_logs") == [(4, 1)]
        assert await store.fetch_raw("SELECT count(*) FROM turn_event_batches") == [(0,)]
        page = await log.read("c1", "t1")
        assert page.last_id == 4 and page.truncated and page.events == ()


async def test_an_operation_while_the_store_closes_never_runs_inline(tmp_path: Path) -> None:
    """The close runs on the worker thread and is counted like any hop, so an operation
    that arrives meanwhile (a turn's background release, the turn log's writer) is
    refused with ``StorageError``; run inline, it used the connection on the event loop's
    thread while the worker closed it (a segmentation fault in the ``sqlite3`` module)."""
    gate = threading.Event()  # holds the worker, so the inline use here cannot crash
    late: asyncio.Future[object] | None = None
    try:
        async with SqliteStore.open(tmp_path / "closing.db") as store:
            chat = await store.create_chat(owner="o")
            store._worker.submit(lambda: gate.wait(10))

            async def arrives_while_closing() -> None:
                nonlocal late
                await asyncio.sleep(0)  # the close is queued on the worker by now
                late = asyncio.ensure_future(store.load_chat(chat.id))
                await asyncio.sleep(0)
                gate.set()

            arriving = asyncio.ensure_future(arrives_while_closing())
        await arriving
    finally:
        gate.set()
    assert late is not None
    with pytest.raises(StorageError):
        await late
