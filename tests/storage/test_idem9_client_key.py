"""A turn's client key (``TurnStart.client_key``, helper "idem9"): recorded with the
turn, unique in its chat; a begin naming a key a turn of the chat holds is
``TurnKeyRecorded`` naming that turn, running or ended, and writes nothing."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import pytest

from tests.storage.support import Backend, commit, start
from turnstate.core import ChatBusy, ChatNotFound, TurnKeyRecorded
from turnstate.storage import LATEST_VERSION, SqliteStore, _sqlite_conn
from turnstate.storage._migrations import migrate


async def test_a_key_names_its_turn_running_or_ended(backend: Backend) -> None:
    store = backend.store
    await store.create_chat(owner="alice", chat_id="c1")
    lease = await store.begin_turn("c1", start("t1", client_key="k-1"), owner="alice")
    with pytest.raises(TurnKeyRecorded) as running:  # before the busy check
        await store.begin_turn("c1", start("t2", client_key="k-1"), owner="alice")
    assert (running.value.chat_id, running.value.key, running.value.turn_id) == (
        "c1", "k-1", "t1")
    with pytest.raises(ChatBusy):  # another key, or none: busy as before
        await store.begin_turn("c1", start("t2", client_key="k-2"))
    await store.commit_turn(lease, commit())
    before = await store.list_messages("c1")
    with pytest.raises(TurnKeyRecorded) as ended:
        await store.begin_turn("c1", start("t3", client_key="k-1", replace_from=2))
    assert ended.value.turn_id == "t1"
    assert await store.list_messages("c1") == before  # the cut after it: nothing cut
    assert [t.id for t in await store.list_turns("c1", limit=None)] == ["t1"]
    second = await store.begin_turn("c1", start("t4", client_key="k-2"))  # a new key runs
    await store.commit_turn(second, commit())
    await store.create_chat(owner="alice", chat_id="c2")  # a key is unique per chat only
    await store.begin_turn("c2", start("t5", client_key="k-1"))


async def test_another_owners_chat_is_not_found_before_its_keys(backend: Backend) -> None:
    store = backend.store
    await store.create_chat(owner="alice", chat_id="c1")
    await store.begin_turn("c1", start("t1", client_key="k"), owner="alice")
    with pytest.raises(ChatNotFound):
        await store.begin_turn("c1", start("t2", client_key="k"), owner="mallory")


async def test_a_file_from_before_the_key_takes_keys(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "v14.db"
    monkeypatch.setattr(_sqlite_conn, "migrate", functools.partial(migrate, target=14))
    async with SqliteStore.open(path) as store:
        await store.create_chat(owner="alice", chat_id="c1")
        lease = await store.begin_turn("c1", start("t-old"))
        await store.commit_turn(lease, commit())
    monkeypatch.undo()
    async with SqliteStore.open(path) as store:
        assert await store.fetch_raw("SELECT max(version) FROM schema_migrations") == [
            (LATEST_VERSION,)]
        await store.begin_turn("c1", start("t-new", client_key="k"))
        with pytest.raises(TurnKeyRecorded):
            await store.begin_turn("c1", start("t-again", client_key="k"))


async def test_a_key_is_looked_up_in_its_chat(backend: Backend) -> None:
    store: Any = backend.store
    await store.create_chat(owner="alice", chat_id="c1")
    await store.create_chat(owner="alice", chat_id="c2")
    await store.begin_turn("c1", start("t1", client_key="k"))
    assert await store.keyed_turn("c1", "k") == "t1"
    assert await store.keyed_turn("c1", "other") is None
    assert await store.keyed_turn("c2", "k") is None


async def test_a_deleted_question_holds_its_key_no_more(backend: Backend) -> None:
    store: Any = backend.store
    await store.create_chat(owner="alice", chat_id="c1")
    first = await store.begin_turn("c1", start("t1", client_key="k"))
    await store.commit_turn(first, commit())
    again = await store.begin_turn("c1", start("t2", client_key="k", replace_from=1))
    assert await store.keyed_turn("c1", "k") == "t2"  # an edit's cut frees the key
    await store.commit_turn(again, commit())
    await store.delete_messages_from("c1", 1)
    assert await store.keyed_turn("c1", "k") is None
    await store.begin_turn("c1", start("t3", client_key="k"))
    assert await store.keyed_turn("c1", "k") == "t3"
