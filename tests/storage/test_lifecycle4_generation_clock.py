"""SQLite leases without a boot id run on the monotonic clock too (helper "lifecycle4").

Without ``/proc/sys/kernel/random/boot_id`` the lease timeline fell back to the wall
clock: a step of it moved every lease (forward: every running turn reclaimable; back: a
dead node's chats locked for the step). The timeline is now fixed per *generation* of
the file's processes: a lock file beside the database, held shared by every writing
store; a store that finds nobody else holding it (tried exclusive inside the write lock)
knows every lease in the file belongs to a dead process, fixes a new offset and expires
them all. A reboot ends every holder, so a generation never spans two boots.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from tests.storage.support import start
from tests.storage.test_lease_clock import HOUR, Clocks
from turnstate.core._errors import ChatBusy
from turnstate.storage import SqliteStore, _lease_clock


@pytest.fixture(autouse=True)
def no_boot_id(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_lease_clock, "read_boot_id", lambda *args: None)


@asynccontextmanager
async def _open(clocks: Clocks, path: Path) -> AsyncIterator[SqliteStore]:
    async with SqliteStore.open(path / "leases.db", clock=clocks.wall,
                                monotonic=clocks.mono) as store:
        yield store


@pytest.mark.parametrize("step", [HOUR, -HOUR])
async def test_without_a_boot_id_a_wall_step_moves_no_lease(tmp_path: Path,
                                                            step: float) -> None:
    """Two stores on one file, the second opened after a wall step of an hour: a dead
    node's 10 s lease is busy at 9.9 s and reclaimed at 10 s, on both."""
    clocks = Clocks()
    async with _open(clocks, tmp_path) as first:
        await first.create_chat(owner="alice", chat_id="c1")
        await first.begin_turn("c1", start("t1", lease_seconds=10))
        clocks.step_wall(step)
        async with _open(clocks, tmp_path) as second:
            clocks.elapse(9.9)
            for store in (first, second):
                assert await store.reclaim_expired() == 0
                with pytest.raises(ChatBusy):
                    await store.begin_turn("c1", start("t2", lease_seconds=10))
            clocks.elapse(0.1)
            assert await second.reclaim_expired() == 1
            assert (await second.load_turn("t1")).reason == "lease_expired"


async def test_a_store_alone_on_the_file_frees_a_dead_generations_chats(
        tmp_path: Path) -> None:
    """Every store of the file closed (its processes died, or the host rebooted: the
    monotonic clock starts again near 0): the next store alone on the file expires the
    leases they left, so their chats are free at once, not an hour later."""
    clocks = Clocks()
    async with _open(clocks, tmp_path) as before:
        await before.create_chat(owner="alice", chat_id="c1")
        await before.begin_turn("c1", start("t1", lease_seconds=HOUR))
    clocks.mono.now = 12.0  # a reboot
    async with _open(clocks, tmp_path) as after:
        await after.begin_turn("c1", start("t2", lease_seconds=10))
        assert (await after.load_turn("t1")).reason == "lease_expired"
        async with _open(clocks, tmp_path) as joined:  # joins: t2's lease is left alone
            with pytest.raises(ChatBusy):
                await joined.begin_turn("c1", start("t3", lease_seconds=10))
    assert (tmp_path / "leases.db-leases").exists()
