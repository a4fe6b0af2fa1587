"""Conformance: the bytes each owner stores (``storage_used``) and the quota on them
(``set_storage_quota``, ``StorageQuotaExceeded``), on every backend (``storage._quota``)."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from tests.storage.support import Backend, abort, commit, committed_turn, start
from turnstate.core import ImagePart, TextPart
from turnstate.core._errors import ConfigurationError, StorageQuotaExceeded
from turnstate.storage import PostgresStore, SqliteStore
from turnstate.storage import _postgres_quota as pg_quota
from turnstate.storage import _sqlite_quota as sqlite_quota
from turnstate.storage._quota import QuotaStore
from turnstate.storage._turn_log import LoggedEvent, turn_log_of

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 40  # 10 KiB of media


def _events(first: int, last: int) -> list[LoggedEvent]:
    return [LoggedEvent(i, "text_delta", json.dumps({"text": "x" * 100, "type": "text_delta"}))
            for i in range(first, last + 1)]


async def _used(backend: Backend, owner: str = "alice") -> int:
    """``storage_used``, checked against the owner's bytes counted from the rows (the SQL
    stores' counter, kept by triggers while a quota is set, must never drift from it)."""
    used: int = await backend.store.storage_used(owner)
    if isinstance(backend.store, PostgresStore):
        rows = await backend.store.fetch_raw(pg_quota.COUNTED_FROM_ROWS, [owner])
        assert used == rows[0][0]
    elif isinstance(backend.store, SqliteStore):
        assert [(used,)] == await backend.store.fetch_raw(sqlite_quota.COUNTED, [owner])
    return used


@pytest.mark.parametrize("quota", [None, 10**12])
async def test_every_write_counts_and_every_delete_frees(backend: Backend,
                                                         quota: int | None) -> None:
    store = backend.store
    assert isinstance(store, QuotaStore)
    await store.set_storage_quota(quota)
    assert await _used(backend) == 0
    await store.create_chat(owner="alice", chat_id="c1")
    await store.create_chat(owner="bob", chat_id="b1")
    empty = await _used(backend)
    await committed_turn(store, "c1", "t1", text="hello " * 50, reply="hi " * 50)
    one = await _used(backend)
    assert one >= empty + 550  # both messages' texts at least
    lease = await store.begin_turn("c1", start("t2", "look", user_parts=(
        TextPart(text="look"), ImagePart(media_type="image/png", data=PNG))))
    with_media = await _used(backend)
    assert with_media >= one + len(PNG)  # the media's bytes count (base64 or raw)
    log = turn_log_of(store)
    await log.append("t2", _events(1, 20))
    logged = await _used(backend)
    assert logged >= with_media + 20 * 100
    await store.commit_turn(lease, commit(parts=(TextPart(text="a cat " * 100),)))
    committed = await _used(backend)
    assert committed >= logged + 600
    await store.rename_chat("c1", "Cats " * 10, owner="alice")
    assert await _used(backend) == committed + 50
    await store.rename_chat("c1", "Cats", owner="alice")  # a title changed in place
    titled = await _used(backend)
    assert titled == committed + 4
    await store.edit_message("c1", 1, [TextPart(text="hello")], owner="alice")
    edited = await _used(backend)
    assert edited < titled
    assert await _used(backend, "bob") < 100
    backend.clock.advance(3600)
    assert await log.expire(older_than=timedelta(seconds=60)) == 1  # the log trimmed
    trimmed = await _used(backend)
    assert trimmed <= edited - 20 * 100
    await store.delete_messages_from("c1", 3, owner="alice")  # the second turn and media
    cut = await _used(backend)
    assert cut <= trimmed - len(PNG) - 600
    await store.rename_chat("c1", None, owner="alice")
    await store.delete_chat("c1", owner="alice")
    assert await _used(backend) == 0


async def test_a_deleted_chat_takes_its_log_and_title(backend: Backend) -> None:
    store = backend.store
    await store.set_storage_quota(10**12)
    await store.create_chat(owner="alice", chat_id="c1")
    lease = await store.begin_turn("c1", start("t1"))
    await turn_log_of(store).append("t1", _events(1, 5))
    await store.abort_turn(lease, abort(parts=(TextPart(text="partial " * 20),)))
    await store.rename_chat("c1", "gone soon", owner="alice")
    assert await _used(backend) > 500
    await store.delete_chat("c1", owner="alice")
    assert await _used(backend) == 0


async def test_the_quota_refuses_a_begin_before_it_writes(backend: Backend) -> None:
    store = backend.store
    assert await store.storage_quota() is None
    await store.create_chat(owner="alice", chat_id="c1")
    await store.create_chat(owner="bob", chat_id="b1")
    await committed_turn(store, "c1", "t1", text="x" * 1000)
    used = await store.storage_used("alice")  # counted from the rows: no quota yet
    await store.set_storage_quota(used + 500)  # the counters start from the rows
    assert await store.storage_quota() == used + 500
    with pytest.raises(StorageQuotaExceeded):
        await store.begin_turn("c1", start("t2", "y" * 1000), owner="alice")
    with pytest.raises(StorageQuotaExceeded):  # media counts before the provider is paid
        await store.begin_turn("c1", start("t3", "y", user_parts=(
            ImagePart(media_type="image/png", data=PNG),)), owner="alice")
    assert await _used(backend) == used  # nothing of them written
    assert len(await store.list_messages("c1")) == 2
    assert [t.id for t in await store.list_turns("c1")] == ["t1"]
    assert (await store.load_chat("c1")).active_turn_id is None
    await committed_turn(store, "b1", "u1", text="y" * 1000)  # another owner: its own count
    # A small turn fits; its answer is paid for and is stored even past the quota.
    lease = await store.begin_turn("c1", start("t4", "ok"), owner="alice")
    await store.commit_turn(lease, commit(parts=(TextPart(text="z" * 2000),)))
    assert await _used(backend) > used + 500
    with pytest.raises(StorageQuotaExceeded):  # now even a small one is refused
        await store.begin_turn("c1", start("t5", "ok"), owner="alice")
    with pytest.raises(StorageQuotaExceeded):
        await store.edit_message("c1", 1, [TextPart(text="x" * 2000)], owner="alice")
    with pytest.raises(StorageQuotaExceeded):
        await store.rename_chat("c1", "a title", owner="alice")
    assert await store.chat_titles(["c1"], owner="alice") == {}
    assert (await store.load_history("c1"))[0].parts == (TextPart(text="x" * 1000),)
    await store.edit_message("c1", 1, [TextPart(text="short")], owner="alice")  # shrinks
    await store.delete_messages_from("c1", 3, owner="alice")
    lease = await store.begin_turn("c1", start("t6", "room again"), owner="alice")
    await store.abort_turn(lease, abort())
    now = await _used(backend)
    await store.set_storage_quota(10**9)  # a change of the number keeps the counters
    assert await _used(backend) == now
    await store.set_storage_quota(None)
    assert await store.storage_quota() is None
    with pytest.raises(ConfigurationError):
        await store.set_storage_quota(-1)
