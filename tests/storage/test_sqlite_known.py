"""SQLite: a cursor turn's begin and commit as one statement each (issue 26).

A store remembers the chat its last write of it left (its creation or a commit) and
begins the next turn with one statement that checks that row is still what it wrote
(``BEGIN_KNOWN``); a commit of a lease carrying begin's chat is one statement too
(``COMMIT_KNOWN``). Whatever else wrote the chat meanwhile (another process, a raw
writer, this store's other operations), the begin must hand over what ``load_chat``
reads, with the seq after the last message and the next lease epoch: the checked
statement writes nothing and the full transaction decides.
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import attrs
import pytest

from tests.storage.support import abort, commit, committed_turn, start
from turnstate.core._conversation import MessageStatus
from turnstate.core._errors import ChatBusy, ChatNotFound, CommitConflict, TurnAlreadyRecorded
from turnstate.storage import SqliteStore, TurnStatus, _sqlite_turns
from turnstate.storage import _sqlite_sql as q

_RAW = {
    "version bumped": "UPDATE chats SET version = version + 1",
    "provider state changed": "UPDATE chats SET last_provider_state = NULL",
    "context changed": "UPDATE chats SET last_context_state = '{}'",
    "committed seq changed": "UPDATE chats SET committed_seq = 1",
    "history chars changed": "UPDATE chats SET history_chars = history_chars + 5",
    "lease epoch moved": "UPDATE chats SET lease_epoch = lease_epoch + 3",
    "updated_at changed": "UPDATE chats SET updated_at = '2031-01-01T00:00:00.000000Z'",
    "a message past the last seq": (
        "INSERT INTO messages (id, chat_id, seq, role, status, parts, created_at, updated_at)"
        " VALUES ('x:user', 'c1', 9, 'user', 'aborted', '[]',"
        " '2026-01-01T00:00:00.000000Z', '2026-01-01T00:00:00.000000Z')"),
}


def _statements(traced: list[str]) -> list[str]:
    """The statements run, each once (SQLite traces each statement a trigger runs as the
    statement that fired it)."""
    return [" ".join(s.split()[:3]).split(" (")[0] for index, s in enumerate(traced)
            if not s.startswith("PRAGMA") and (index == 0 or s != traced[index - 1])]


async def _expected_next(store: SqliteStore) -> tuple[int, int]:
    """The seq and lease epoch the next begin must take, read from the file."""
    ((last_seq,),) = await store.fetch_raw(
        "SELECT coalesce(max(seq), 0) FROM messages WHERE chat_id = 'c1'")
    ((epoch,),) = await store.fetch_raw("SELECT lease_epoch FROM chats WHERE id = 'c1'")
    return last_seq + 1, epoch + 1


@pytest.mark.parametrize("change", sorted(_RAW))
async def test_a_begin_after_a_raw_write_hands_over_the_stored_chat(
        tmp_path: Path, change: str) -> None:
    """Every column begin hands over from what it remembers is checked: a row changed
    behind the store's back makes the begin read it (each change alone would otherwise
    hand over a stale chat, seq or epoch; ``updated_at`` begin sets itself)."""
    async with SqliteStore.open(tmp_path / "x.db") as store:
        await store.create_chat(owner="alice", chat_id="c1")
        await committed_turn(store, "c1", "t1", cursor="resp_1")
        await store.fetch_raw(_RAW[change])
        seq, epoch = await _expected_next(store)
        lease = await store.begin_turn("c1", start("t2"))
        assert (lease.user_seq, lease.epoch) == (seq, epoch)
        assert lease.chat == await store.load_chat("c1")
        assert lease.base_version == lease.chat.version
        chat = await store.commit_turn(lease, commit("resp_2"))
        assert chat == await store.load_chat("c1")


async def test_a_begin_of_a_chat_leased_behind_the_stores_back_is_busy(tmp_path: Path) -> None:
    """A lease written without moving the epoch (a raw writer) is still a lease."""
    async with SqliteStore.open(tmp_path / "x.db") as store:
        await store.create_chat(owner="alice", chat_id="c1")
        await committed_turn(store, "c1", "t1")
        await store.fetch_raw("UPDATE chats SET active_turn_id = 'x', "
                              "active_turn_expires_at = '2999-01-01T00:00:00.000000Z'")
        with pytest.raises(ChatBusy):
            await store.begin_turn("c1", start("t2"))


@pytest.mark.parametrize("other_op", ["turn", "begin and abort", "clear", "delete message"])
async def test_a_begin_after_another_stores_write_hands_over_the_stored_chat(
        tmp_path: Path, other_op: str) -> None:
    """Another process's store writing the chat between two turns of this one: the next
    begin here hands over the chat as stored, after the last seq, at the next epoch."""
    path = tmp_path / "x.db"
    async with SqliteStore.open(path) as store, SqliteStore.open(path) as other:
        await store.create_chat(owner="alice", chat_id="c1")
        await committed_turn(store, "c1", "t1", cursor="resp_1")
        if other_op == "turn":
            await committed_turn(other, "c1", "o1", cursor="resp_o")
        elif other_op == "begin and abort":
            await other.abort_turn(await other.begin_turn("c1", start("o1")), abort())
        elif other_op == "clear":
            await other.clear_provider_state("c1", reason="test")
        else:
            await other.delete_message("c1", 2)
        seq, epoch = await _expected_next(store)
        lease = await store.begin_turn("c1", start("t2"))
        assert (lease.user_seq, lease.epoch) == (seq, epoch)
        assert lease.chat == await store.load_chat("c1")
        assert await store.commit_turn(lease, commit("resp_2")) == await store.load_chat("c1")


async def test_a_chat_this_store_wrote_last_begins_in_one_statement(tmp_path: Path) -> None:
    """A created chat's first turn and every turn after a commit by this store: begin is
    one statement, commit one; after another store's write, begin reads the chat again
    (the full transaction) and the turn after it is one statement again."""
    path = tmp_path / "x.db"
    async with SqliteStore.open(path) as store, SqliteStore.open(path) as other:
        await store.create_chat(owner="alice", chat_id="c1")
        shapes = []
        for index in range(4):
            if index == 2:
                await other.clear_provider_state("c1", reason="test")
            traced: list[str] = []
            store._conn.set_trace_callback(traced.append)
            try:
                await committed_turn(store, "c1", f"t{index}", cursor=f"resp_{index}")
            finally:
                store._conn.set_trace_callback(None)
            shapes.append(_statements(traced))
    one = [q.BEGIN_KNOWN.split(" (")[0], q.COMMIT_KNOWN.split(" (")[0]]
    assert shapes[0] == shapes[1] == shapes[3] == one, shapes
    assert shapes[2][0] == "INSERT INTO temp.turn_begins", shapes[2]  # checked, refused
    assert shapes[2][1:] == ["BEGIN IMMEDIATE", "SELECT", "INSERT INTO messages",
                             "INSERT INTO turns", "UPDATE chats SET", "COMMIT", one[1]], shapes[2]


async def test_a_begin_of_a_leased_or_gone_chat_is_refused_as_before(tmp_path: Path) -> None:
    """The one-statement begin decides nothing itself: a chat leased by another store
    is busy, a deleted chat is not found, another owner's chat is not found, a turn id
    begun before is already recorded."""
    path = tmp_path / "x.db"
    async with SqliteStore.open(path) as store, SqliteStore.open(path) as other:
        await store.create_chat(owner="alice", chat_id="c1")
        await committed_turn(store, "c1", "t1")
        with pytest.raises(ChatNotFound):
            await store.begin_turn("c1", start("t2"), owner="bob")
        await committed_turn(store, "c1", "t2")
        with pytest.raises(TurnAlreadyRecorded):
            await store.begin_turn("c1", start("t1"))
        await committed_turn(store, "c1", "t3")
        held = await other.begin_turn("c1", start("o1"))
        with pytest.raises(ChatBusy):
            await store.begin_turn("c1", start("t4"))
        await other.commit_turn(held, commit("resp_o"))
        await committed_turn(store, "c1", "t4")
        await other.delete_chat("c1")
        with pytest.raises(ChatNotFound):
            await store.begin_turn("c1", start("t5"))


async def test_a_held_lock_moves_the_one_statement_commit_off_the_event_loop(
        tmp_path: Path) -> None:
    """Another process holding the write lock: the one-statement commit gives up inline
    at once, waits on the worker thread, then commits."""
    path = tmp_path / "x.db"
    async with SqliteStore.open(path) as store:
        await store.create_chat(owner="alice", chat_id="c1")
        lease = await store.begin_turn("c1", start("t1"))
        other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        other.execute("BEGIN IMMEDIATE")
        task = asyncio.ensure_future(store.commit_turn(lease, commit("resp_1")))
        await asyncio.sleep(0)
        assert store._in_flight == 1 and not task.done()
        await asyncio.to_thread(other.execute, "ROLLBACK")
        assert await task == await store.load_chat("c1")
        other.close()


async def test_a_store_remembers_a_bounded_number_of_chats(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The chats a store remembers for the one-statement begin are bounded (the oldest
    is forgotten; its next begin reads the chat)."""
    monkeypatch.setattr(_sqlite_turns, "KNOWN_CHATS", 3)
    async with SqliteStore.open(tmp_path / "x.db") as store:
        for index in range(5):
            await store.create_chat(owner="alice", chat_id=f"c{index}")
        assert list(store._known) == ["c2", "c3", "c4"]
        lease = await store.begin_turn("c0", start("t0"))
        assert lease.chat == await store.load_chat("c0")


async def test_a_read_only_store_creates_no_temporary_writes(tmp_path: Path) -> None:
    """A read-only open creates nothing, not even the temporary views; a writable open's
    views live in the connection's temporary schema, not in the file."""
    path = tmp_path / "x.db"
    async with SqliteStore.open(path) as store:
        assert {name for (name,) in await store.fetch_raw(
            "SELECT name FROM sqlite_temp_master")} == {
            "turn_commits", "turn_commits_write", "turn_begins", "turn_begins_write",
            "turn_begins_attached", "turn_begins_attached_write"}
        assert await store.fetch_raw(
            "SELECT name FROM sqlite_master WHERE type IN ('view', 'trigger') "
            "AND name LIKE 'turn_%'") == []
    async with SqliteStore.open(path, read_only=True) as reader:
        assert await reader.fetch_raw("SELECT name FROM sqlite_temp_master") == []


@pytest.mark.parametrize("carries_chat", [True, False])
async def test_a_commit_whose_messages_moved_is_a_conflict_and_writes_nothing(
        tmp_path: Path, carries_chat: bool) -> None:
    """A turn's message changed behind the lease (a raw writer): the commit, one
    statement or the full transaction, is a conflict and leaves the chat, both messages
    and the turn as they were."""
    async with SqliteStore.open(tmp_path / "x.db") as store:
        await store.create_chat(owner="alice", chat_id="c1")
        lease = await store.begin_turn("c1", start("t1"))
        lease = lease if carries_chat else attrs.evolve(lease, chat=None)
        await store.fetch_raw("UPDATE messages SET status = 'aborted' WHERE seq = 2")
        chat = await store.load_chat("c1")
        with pytest.raises(CommitConflict):
            await store.commit_turn(lease, commit("resp_1"))
        assert await store.load_chat("c1") == chat
        assert [m.status for m in await store.list_messages("c1")] == [
            MessageStatus.IN_PROGRESS, MessageStatus.ABORTED]
        assert (await store.load_turn("t1")).status is TurnStatus.IN_PROGRESS
