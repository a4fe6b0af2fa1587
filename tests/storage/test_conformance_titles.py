"""Conformance: chat titles (``rename_chat``, ``chat_titles``) and ``create_chat``'s
per-owner bound (``max_chats``), on every backend."""

from __future__ import annotations

import asyncio

import pytest

from tests import pg_support
from tests.storage.support import Backend, abort, start
from turnstate.core._errors import (
    ChatAlreadyExists,
    ChatLimitReached,
    ChatNotFound,
    InvalidInput,
)
from turnstate.storage import PostgresStore
from turnstate.storage._record_checks import MAX_TITLE_CHARS


async def test_a_title_is_set_changed_and_removed_without_touching_the_chat(
        backend: Backend) -> None:
    store = backend.store
    chat = await store.create_chat(owner="alice", chat_id="c1")
    await store.create_chat(owner="alice", chat_id="c2")
    assert await store.chat_titles(["c1", "c2"], owner="alice") == {}
    backend.clock.advance(5)
    await store.rename_chat("c1", "Trip to Lisbon ✈", owner="alice")
    assert await store.chat_titles(["c1", "c2", "nope"], owner="alice") == {
        "c1": "Trip to Lisbon ✈"}
    await store.rename_chat("c1", "Porto instead")
    assert await store.chat_titles(["c1"], owner="alice") == {"c1": "Porto instead"}
    after = await store.load_chat("c1")  # a rename is no activity: the list order stays
    assert (after.version, after.updated_at) == (chat.version, chat.updated_at)
    await store.rename_chat("c1", None, owner="alice")
    assert await store.chat_titles(["c1"], owner="alice") == {}


async def test_renaming_is_owner_scoped(backend: Backend) -> None:
    store = backend.store
    await store.create_chat(owner="alice", chat_id="c1")
    with pytest.raises(ChatNotFound):
        await store.rename_chat("c1", "mine now", owner="bob")
    with pytest.raises(ChatNotFound):
        await store.rename_chat("missing", "x", owner="alice")
    await store.rename_chat("c1", "alice's", owner="alice")
    assert await store.chat_titles(["c1"], owner="bob") == {}
    with pytest.raises(InvalidInput):
        await store.rename_chat("c1", "\ud800", owner="alice")
    with pytest.raises(InvalidInput):
        await store.rename_chat("c1", 5, owner="alice")  # type: ignore[arg-type]


async def test_a_running_turn_does_not_refuse_a_rename_and_delete_takes_the_title(
        backend: Backend) -> None:
    store = backend.store
    await store.create_chat(owner="alice", chat_id="c1")
    lease = await store.begin_turn("c1", start("t1"))
    await store.rename_chat("c1", "while it runs", owner="alice")
    assert (await store.load_chat("c1")).active_turn_id == lease.turn_id
    await store.abort_turn(lease, abort())
    await store.delete_chat("c1", owner="alice")
    await store.create_chat(owner="alice", chat_id="c1")  # the id again: no old title
    assert await store.chat_titles(["c1"], owner="alice") == {}


async def test_max_chats_bounds_each_owner_s_chats(backend: Backend) -> None:
    store = backend.store
    for n in range(3):
        await store.create_chat(owner="alice", chat_id=f"a{n}", max_chats=3)
    with pytest.raises(ChatLimitReached) as refused:
        await store.create_chat(owner="alice", chat_id="a3", max_chats=3)
    assert (refused.value.owner, refused.value.limit) == ("alice", 3)
    assert len(await store.list_chats("alice")) == 3
    await store.create_chat(owner="bob", chat_id="b0", max_chats=3)  # another owner's own
    await store.create_chat(owner="alice", chat_id="a3")  # no bound given: none applies
    await store.delete_chat("a0", owner="alice")
    await store.delete_chat("a1", owner="alice")
    await store.create_chat(owner="alice", chat_id="a4", max_chats=4)  # room again
    for bad in (-1, 1.5, True, "3"):
        with pytest.raises(InvalidInput):
            await store.create_chat(owner="alice", max_chats=bad)  # type: ignore[arg-type]


async def test_concurrent_creates_do_not_pass_the_bound_together(backend: Backend) -> None:
    store = backend.store
    results = await asyncio.gather(
        *(store.create_chat(owner="alice", max_chats=5) for _ in range(20)),
        return_exceptions=True)
    assert sum(not isinstance(r, BaseException) for r in results) == 5
    assert all(isinstance(r, ChatLimitReached) for r in results
               if isinstance(r, BaseException))
    assert len(await store.list_chats("alice")) == 5


async def test_two_postgres_pools_count_one_bound(pg_schema: str) -> None:
    """Two stores on one schema (two processes' pools): their concurrent creates are
    counted one after another by the owner's advisory lock."""
    async with PostgresStore.open(pg_support.DSN, schema=pg_schema, pool_max=4) as one, \
            PostgresStore.open(pg_support.DSN, schema=pg_schema, pool_max=4) as two:
        owner = "pools-owner"
        results = await asyncio.gather(
            *(store.create_chat(owner=owner, max_chats=6)
              for _ in range(12) for store in (one, two)), return_exceptions=True)
        made = [r for r in results if not isinstance(r, BaseException)]
        assert len(made) == 6, results
        assert len(await one.list_chats(owner)) == 6


async def test_a_title_is_bounded_to_the_server_s_length(backend: Backend) -> None:
    """A 100,000-character title was stored; the server's 200 now holds in every store."""
    store = backend.store
    await store.create_chat(owner="alice", chat_id="c1")
    await store.rename_chat("c1", "x" * MAX_TITLE_CHARS, owner="alice")
    with pytest.raises(InvalidInput) as refused:
        await store.rename_chat("c1", "y" * 100_000, owner="alice")
    assert refused.value.field == "title"
    assert await store.chat_titles(["c1"], owner="alice") == {"c1": "x" * MAX_TITLE_CHARS}


async def test_a_taken_id_is_chat_already_exists(backend: Backend) -> None:
    """A taken id raised a plain ``StorageError``; now its own type, on every store."""
    store = backend.store
    await store.create_chat(owner="alice", chat_id="c1")
    for owner in ("alice", "bob"):  # any owner's chat: the id is the key
        with pytest.raises(ChatAlreadyExists) as taken:
            await store.create_chat(owner=owner, chat_id="c1")
        assert (taken.value.chat_id, taken.value.error_code) == ("c1", "chat_already_exists")
    assert [chat.owner for chat in await store.list_chats("alice")] == ["alice"]


@pytest.mark.parametrize("owner", ["", " \t\n"])
async def test_a_blank_owner_is_refused(backend: Backend, owner: str) -> None:
    """An empty or whitespace-only owner was stored: a chat no sign-in names."""
    with pytest.raises(InvalidInput) as refused:
        await backend.store.create_chat(owner=owner, chat_id="c1")
    assert refused.value.field == "owner"
    assert await backend.raw_rows("chats") == []
