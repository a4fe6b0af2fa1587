"""One event loop, the five emulators, an SQLite file: shared by the fault tests."""

from __future__ import annotations

import asyncio
import sqlite3
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import attrs

from tests.engine.support import FakeClock
from turnstate.emulators._emulated import EmulatedProviders
from turnstate.providers._transport import AiohttpTransport, RetryPolicy
from turnstate.storage import SqliteStore


@attrs.define
class FaultRig:
    loop: asyncio.AbstractEventLoop
    stack: EmulatedProviders
    store: SqliteStore
    path: Path
    clock: FakeClock

    def run(self, coro: Any) -> Any:
        return self.loop.run_until_complete(coro)

    def every_row(self) -> list[str]:
        """Every row of every table of the SQLite file, as text (a second connection)."""
        rows: list[str] = []
        with sqlite3.connect(self.path) as conn:
            tables = [t for (t,) in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table'")]
            for table in tables:
                rows += [repr(row) for row in conn.execute(f'SELECT * FROM "{table}"')]
        return rows

    def file_bytes(self) -> bytes:
        """The database file and its WAL, raw."""
        return b"".join(p.read_bytes() for p in self.path.parent.glob(self.path.name + "*"))


@contextmanager
def fault_rig() -> Iterator[FaultRig]:
    loop = asyncio.new_event_loop()
    with tempfile.TemporaryDirectory(prefix="turnstate-faults-") as folder:
        path = Path(folder) / "faults.sqlite"
        clock = FakeClock()
        stack = loop.run_until_complete(EmulatedProviders().start())
        manager = SqliteStore.open(path, clock=clock)
        store = loop.run_until_complete(manager.__aenter__())
        try:
            yield FaultRig(loop, stack, store, path, clock)
        finally:
            loop.run_until_complete(manager.__aexit__(None, None, None))
            loop.run_until_complete(stack.close())
            loop.close()


def quick_transport(**options: Any) -> AiohttpTransport:
    """A transport with no retry waits (a test never sleeps for real)."""
    async def no_sleep(_: float) -> None:
        return None

    options.setdefault("retry", RetryPolicy(max_attempts=1))
    return AiohttpTransport(sleep=no_sleep, **options)
