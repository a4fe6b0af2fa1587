"""Leases on ``MemoryStore`` and ``SqliteStore`` run on a monotonic clock: a step of the
wall clock (NTP, a VM's resume, ``date -s``) larger than the lease neither ends a live
turn's lease nor keeps a dead node's lease alive (``storage/_lease_clock.py``).

Both clocks are injected (the wall clock a ``ManualClock``, the monotonic one a counter):
no sleeps."""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from datetime import timedelta
from pathlib import Path

import pytest

from tests.storage.support import commit, start
from turnstate.core._conversation import TextPart
from turnstate.core._errors import ChatBusy
from turnstate.storage import MemoryStore, SqliteStore, TurnStatus, _sqlite_conn
from turnstate.storage._migrations import migrate
from turnstate.storage._protocol import Store
from turnstate.testing import ManualClock

HOUR = 3600.0


class Monotonic:
    """A monotonic clock that moves only when told to."""

    def __init__(self, start: float = 5000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now


class Clocks:
    """The wall clock and the monotonic clock a store is given; ``elapse`` moves both."""

    def __init__(self) -> None:
        self.wall, self.mono = ManualClock(), Monotonic()

    def elapse(self, seconds: float) -> None:
        self.wall.advance(seconds)
        self.mono.now += seconds

    def step_wall(self, seconds: float) -> None:
        self.wall.advance(seconds)


Opener = Callable[[Clocks, Path], AbstractAsyncContextManager[Store]]


@asynccontextmanager
async def _memory(clocks: Clocks, _path: Path) -> AsyncIterator[Store]:
    yield MemoryStore(clock=clocks.wall, monotonic=clocks.mono)


def _sqlite(clocks: Clocks, path: Path, boot: str = "boot-1") -> AbstractAsyncContextManager[
        SqliteStore]:
    return SqliteStore.open(path / "leases.db", clock=clocks.wall, monotonic=clocks.mono,
                            boot_id=boot)


@pytest.fixture(params=["memory", "sqlite"])
def opener(request: pytest.FixtureRequest) -> Opener:
    return _memory if request.param == "memory" else _sqlite  # type: ignore[return-value]


@pytest.mark.parametrize("step", [HOUR, -HOUR])
async def test_a_wall_clock_step_leaves_a_live_turns_lease(
        opener: Opener, tmp_path: Path, step: float) -> None:
    """A turn renewing its 10 s lease keeps it across a wall-clock step of an hour either
    way: no other turn takes the chat, no reclaim ends it, no edit gets through, and it
    commits. The stamps the store shows stay on the wall clock."""
    clocks = Clocks()
    async with opener(clocks, tmp_path) as store:
        await store.create_chat(owner="alice", chat_id="c1")
        lease = await store.begin_turn("c1", start("t1", lease_seconds=10))
        clocks.step_wall(step)
        clocks.elapse(5)
        await store.renew_lease(lease, 10)
        clocks.elapse(8)  # 13 s after the begin, 8 s after the renewal
        assert await store.reclaim_expired() == 0
        with pytest.raises(ChatBusy):
            await store.begin_turn("c1", start("t2", lease_seconds=10))
        with pytest.raises(ChatBusy):
            await store.delete_messages_from("c1", 1)
        chat = await store.commit_turn(lease, commit("resp_1"))
        assert chat.version == 1 and chat.active_turn_id is None
        assert chat.updated_at == clocks.wall()  # displayed times: the wall clock
        assert (await store.load_turn("t1")).status is TurnStatus.COMPLETED


@pytest.mark.parametrize("step", [HOUR, -HOUR])
async def test_a_dead_nodes_lease_expires_on_time_across_a_wall_clock_step(
        opener: Opener, tmp_path: Path, step: float) -> None:
    """A turn nobody renews loses its 10 s lease 10 s after its begin, whatever the wall
    clock did meanwhile: busy at 9.9 s, reclaimed at 10 s, and the chat is free again."""
    clocks = Clocks()
    async with opener(clocks, tmp_path) as store:
        await store.create_chat(owner="alice", chat_id="c1")
        await store.begin_turn("c1", start("t1", lease_seconds=10))
        clocks.step_wall(step)
        clocks.elapse(9.9)
        assert await store.reclaim_expired() == 0
        with pytest.raises(ChatBusy):
            await store.begin_turn("c1", start("t2", lease_seconds=10))
        clocks.elapse(0.1)
        assert await store.reclaim_expired() == 1
        assert (await store.load_turn("t1")).reason == "lease_expired"
        lease = await store.begin_turn("c1", start("t2", lease_seconds=10))
        await store.commit_turn(lease, commit("resp_2"))


@pytest.mark.parametrize("step", [HOUR, -HOUR])
async def test_a_takeover_waits_for_the_lease_not_the_wall_clock(
        opener: Opener, tmp_path: Path, step: float) -> None:
    """The next begin takes a dead turn's chat once its lease ran out on the monotonic
    clock, not before (a forward step) nor an hour later (a backward step)."""
    clocks = Clocks()
    async with opener(clocks, tmp_path) as store:
        await store.create_chat(owner="alice", chat_id="c1")
        await store.begin_turn("c1", start("t1", lease_seconds=10))
        clocks.step_wall(step)
        with pytest.raises(ChatBusy):
            await store.begin_turn("c1", start("t2", lease_seconds=10))
        clocks.elapse(10)
        await store.begin_turn("c1", start("t2", lease_seconds=10))
        assert (await store.load_turn("t1")).reason == "lease_expired"


async def test_processes_of_one_boot_share_the_lease_timeline(tmp_path: Path) -> None:
    """Two stores on one file (two processes of one host) read one timeline: a store
    opened after a wall-clock step of an hour finds the other's live lease busy, and its
    reclaim waits for the lease's own end."""
    clocks = Clocks()
    async with _sqlite(clocks, tmp_path) as first:
        await first.create_chat(owner="alice", chat_id="c1")
        await first.begin_turn("c1", start("t1", lease_seconds=10))
        clocks.step_wall(HOUR)
        async with _sqlite(clocks, tmp_path) as second:
            with pytest.raises(ChatBusy):
                await second.begin_turn("c1", start("t2", lease_seconds=10))
            assert await second.reclaim_expired() == 0
            clocks.elapse(10)
            assert await second.reclaim_expired() == 1
        assert await first.fetch_raw("SELECT count(*) FROM lease_clock") == [(1,)]


async def test_a_lease_written_before_a_reboot_counts_as_expired(tmp_path: Path) -> None:
    """After a reboot (another boot id, the monotonic clock near 0 again, the wall clock
    stepped back an hour) the first store to open marks every older lease expired: its
    holder died with the boot. The chat is taken at once; the old leases' stamps are
    not in the new timeline's future."""
    clocks = Clocks()
    async with _sqlite(clocks, tmp_path) as before:
        await before.create_chat(owner="alice", chat_id="c1")
        await before.create_chat(owner="alice", chat_id="c2")
        await before.begin_turn("c1", start("t1", lease_seconds=HOUR))
        await before.begin_turn("c2", start("t2", lease_seconds=HOUR))
    clocks.mono.now = 12.0
    clocks.step_wall(-HOUR)
    async with _sqlite(clocks, tmp_path, boot="boot-2") as after:
        await after.begin_turn("c1", start("t3", lease_seconds=10))
        assert (await after.load_turn("t1")).reason == "lease_expired"
        assert await after.reclaim_expired() == 1  # c2's
        assert await after.fetch_raw("SELECT boot_id FROM lease_clock") == [("boot-2",)]


async def test_a_version_ten_database_keeps_working(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Migration 11 adds ``lease_clock``: a version 10 file with a turn running opens,
    the first open of the boot ends that turn's lease (written on the wall clock by
    the older version, whose process is gone), and turns run on the new timeline."""
    clocks = Clocks()
    monkeypatch.setattr(_sqlite_conn, "migrate", functools.partial(migrate, target=10))
    async with SqliteStore.open(tmp_path / "leases.db", clock=clocks.wall) as old:
        await old.create_chat(owner="alice", chat_id="c1")
        await old.begin_turn("c1", start("t1", lease_seconds=60))
        assert await old.fetch_raw("SELECT max(version) FROM schema_migrations") == [(10,)]
    monkeypatch.undo()
    async with _sqlite(clocks, tmp_path) as store:
        assert await store.fetch_raw("SELECT max(version) FROM schema_migrations") == [(11,)]
        lease = await store.begin_turn("c1", start("t2", lease_seconds=10))
        assert (await store.load_turn("t1")).reason == "lease_expired"
        clocks.step_wall(-HOUR)
        await store.commit_turn(lease, commit("resp_2"))
        assert [m.parts for m in await store.list_messages("c1")][-1] == (TextPart(text="hi"),)


async def test_the_default_clocks_survive_a_wall_clock_step(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With no clock injected (the real monotonic clocks and boot id), a forward step of
    the stores' wall clock by an hour ends no live lease on either store."""
    wall = ManualClock()
    wall.now = wall.now.replace(year=2030)
    monkeypatch.setattr("turnstate.storage._memory_rows.utc_now", wall)
    monkeypatch.setattr("turnstate.storage._sqlite_conn.utc_now", wall)
    memory = MemoryStore()
    async with SqliteStore.open(tmp_path / "real.db") as sqlite:
        for store in (memory, sqlite):
            await store.create_chat(owner="alice", chat_id="c1")
            await store.begin_turn("c1", start("t1", lease_seconds=60))
        wall.advance(HOUR)
        for store in (memory, sqlite):
            assert await store.reclaim_expired() == 0
            with pytest.raises(ChatBusy):
                await store.begin_turn("c1", start("t2"))
            assert (await store.load_chat("c1")).updated_at < wall.now - timedelta(minutes=59)
