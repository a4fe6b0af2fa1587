"""The mark of a turn begun attached (``TurnStart.attached``, helper "lifecycle7"): kept
by every store and given back by its log's reader; a SQLite file from before version 14
keeps its turns, which read "not known" (False), as every turn read before."""

from __future__ import annotations

import functools
from pathlib import Path

import attrs
import pytest

from tests.storage.support import Backend, abort, start
from turnstate.storage import LATEST_VERSION, SqliteStore, _sqlite_conn
from turnstate.storage._migrations import migrate
from turnstate.storage._turn_log import turn_log_of


async def test_the_log_gives_back_the_attached_mark(backend: Backend) -> None:
    store = backend.store
    for chat_id, attached in (("c1", True), ("c2", False)):
        await store.create_chat(owner="alice", chat_id=chat_id)
        turn = attrs.evolve(start(f"t-{chat_id}"), attached=attached)
        await store.begin_turn(chat_id, turn)
        page = await turn_log_of(store).read(chat_id, f"t-{chat_id}")
        assert page.attached is attached
    await store.create_chat(owner="alice", chat_id="c3")  # a regenerate's begin too
    lease = await store.begin_turn("c3", start("t-c3"))
    await store.abort_turn(lease, abort())
    await store.begin_turn("c3", attrs.evolve(start("t-c3b"), attached=True, replace_from=1))
    assert (await turn_log_of(store).read("c3", "t-c3b")).attached


async def test_a_file_from_before_the_mark_keeps_its_turns_unmarked(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "v13.db"
    monkeypatch.setattr(_sqlite_conn, "migrate", functools.partial(migrate, target=13))
    async with SqliteStore.open(path) as store:
        await store.create_chat(owner="alice", chat_id="c1")
        await store.begin_turn("c1", start("t-old"))  # running when the file is upgraded
    monkeypatch.undo()
    async with SqliteStore.open(path) as store:
        assert await store.fetch_raw("SELECT max(version) FROM schema_migrations") == [
            (LATEST_VERSION,)]
        page = await turn_log_of(store).read("c1", "t-old")
        assert (page.attached, page.turn.id) == (False, "t-old")
