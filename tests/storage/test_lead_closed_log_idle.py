"""A closed store's turn log starts nothing (lead, from soak9's note): an engine still
holding the store after its close (the property suite's old ``reopen_store`` rule did)
asks it to watch for fences as each turn starts, and the watch (SQLite's polling task,
PostgreSQL's listening connection) was started on the closed store, then left pending
when the loop closed ("Task was destroyed but it is pending!", "Event loop is closed")."""

from __future__ import annotations

import asyncio

import pytest

from tests.storage.support import Backend
from turnstate.storage._turn_log import turn_log_of

WATCHES = {"sqlite turn-log watch", "postgres listener open"}


def _watches() -> list[str]:
    return sorted(task.get_name() for task in asyncio.all_tasks()
                  if task.get_name() in WATCHES and not task.done())


async def test_a_closed_store_starts_no_watch(backend: Backend) -> None:
    log = turn_log_of(backend.store)
    if not (hasattr(log, "watch_held") or hasattr(log, "listen")):
        pytest.skip("this store's log watches nothing (one process, no polling)")
    await backend.stack.aclose()  # the store closes; its log object stays reachable
    await asyncio.sleep(0)
    before = _watches()
    watch_held = getattr(log, "watch_held", None)
    if watch_held is not None:
        watch_held()
    listen = getattr(log, "listen", None)
    if listen is not None:
        assert await listen() is False
    assert _watches() == before == []
