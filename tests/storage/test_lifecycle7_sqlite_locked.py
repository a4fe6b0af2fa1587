"""SQLite: a write that waited out its busy timeout behind another process's write is
``StorageContention``, not a bare ``StorageError`` (helper "lifecycle7").

``database is locked`` after ``busy_timeout_ms`` says only that another writer held the
file that long: nothing of the write landed, and it may be sent again. It was a plain
``StorageError("sqlite: database is locked")``, which the server answers 500 and the
detached turns' log writer gives up at once (it retries only the outages: ``STORAGE_OUTAGES``).
It is now ``StorageContention`` (a ``StorageError``, as PostgreSQL's persistent
serialization failures and deadlocks are): the server's 503 with ``Retry-After``, the
log writer's retry. Another file error stays a ``StorageError``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.storage.support import start
from turnstate.core._errors import StorageContention
from turnstate.storage import SqliteStore


@pytest.fixture
def held(tmp_path: Path) -> Iterator[tuple[Path, sqlite3.Connection]]:
    path = tmp_path / "x.db"
    yield path, sqlite3.connect(path, isolation_level=None)


@pytest.mark.parametrize("inline_writes", [True, False])
async def test_a_write_held_past_the_busy_timeout_is_contention(
        held: tuple[Path, sqlite3.Connection], inline_writes: bool) -> None:
    path, other = held
    async with SqliteStore.open(path, busy_timeout_ms=50,
                                inline_writes=inline_writes) as store:
        await store.create_chat(owner="alice", chat_id="c1")
        other.execute("BEGIN IMMEDIATE")  # another process's write, held
        try:
            with pytest.raises(StorageContention, match="locked"):
                await store.create_chat(owner="alice", chat_id="c2")
            with pytest.raises(StorageContention, match="locked"):
                await store.begin_turn("c1", start("t1"))
        finally:
            other.execute("ROLLBACK")
            other.close()
        lease = await store.begin_turn("c1", start("t1"))  # nothing of it had landed
        assert lease.user_seq == 1
