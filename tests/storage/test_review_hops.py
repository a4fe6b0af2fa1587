"""Review of the SQLite store's batched hop reports (issue 26): a failure no future can
carry must not strand the reports handed over with it."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

from turnstate.core._errors import ChatNotFound
from turnstate.storage import SqliteStore

WAIT = 10  # seconds: only a bound on a broken test, never reached when it passes


async def test_a_hop_raising_stop_iteration_strands_no_other_report(tmp_path: Path) -> None:
    """A Future refuses a ``StopIteration`` (``TypeError`` in ``set_exception``): raised
    by a hop, it failed the drain that carried it, the hops reported with it were never
    settled or counted, and every later operation waited for an idle worker forever.
    The caller gets a ``RuntimeError`` instead (as PEP 479 turns it in a generator)."""
    async with SqliteStore.open(tmp_path / "x.db") as store:
        gate, last_done = threading.Event(), threading.Event()
        first = asyncio.ensure_future(store._run(lambda conn: gate.wait(WAIT)))
        await asyncio.sleep(0)
        bad = asyncio.ensure_future(store._run(lambda conn: next(iter(()))))
        await asyncio.sleep(0)
        after = asyncio.ensure_future(store._run(lambda conn: 7))
        await asyncio.sleep(0)
        signal = asyncio.ensure_future(store._run(lambda conn: last_done.set()))
        await asyncio.sleep(0)
        gate.set()
        assert last_done.wait(WAIT)  # the loop's thread held: ``after`` reported, with
        # ``first`` and ``bad``, before the drain that is due runs
        assert await first
        with pytest.raises(RuntimeError, match="StopIteration"):
            await asyncio.wait_for(bad, WAIT)
        assert await asyncio.wait_for(after, WAIT) == 7
        await asyncio.wait_for(signal, WAIT)
        assert store._in_flight == 0
        with pytest.raises(ChatNotFound):
            await store.load_chat("c1")
