"""A turn followed through an SQLite file another process writes (helper "lifecycle").

Two ``turnstate serve`` processes may share one SQLite file; a stream resumed on the
process that does not run the turn follows its log. The log woke its readers only for
this process's own appends, so the other process's were seen at the readers' poll
(2 s): measured with two serve processes and a two-request tool turn, the resumed
stream got nothing (not even its headers) for 2.0 s and then everything at once, where
PostgreSQL's notifications gave ~60 ms. Two stores on one file in one process are two
connections, as two processes are: the reader here polls every 30 s, so only the watch
of the file's ``data_version`` can wake it in time.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from tests.storage.support import start
from turnstate.core._event_json import event_json
from turnstate.engine._follow import follow_log
from turnstate.storage import SqliteStore
from turnstate.storage._turn_log import LoggedEvent, TurnLogPage

WAIT = 5.0  # far under the reader's own 30 s poll


async def test_a_reader_is_woken_by_another_connection_s_append(tmp_path: Path) -> None:
    path = tmp_path / "shared.sqlite"
    async with SqliteStore.open(path) as runner, SqliteStore.open(path) as other:
        chat = await runner.create_chat(owner="alice")
        lease = await runner.begin_turn(chat.id, start("t1"))
        log, read, found_nothing = other.turn_log, other.turn_log.read, asyncio.Event()

        async def noted(*args: Any, **kwargs: Any) -> TurnLogPage:
            page = await read(*args, **kwargs)
            if not page.events:  # the reader waits next, in this same step
                found_nothing.set()
            return page

        log.read = noted  # type: ignore[method-assign]
        following = await follow_log(other, log, chat.id, lease.turn_id, after=0,
                                     owner="alice", encode=event_json, poll_seconds=30)
        batches = aiter(following.batches)
        found_nothing.clear()  # set again by a read that finds nothing after each append
        for event_id in (1, 2):  # (the turn's shared reader reads again after a batch)
            batch = asyncio.ensure_future(anext(batches))
            await asyncio.wait_for(found_nothing.wait(), WAIT)
            found_nothing.clear()
            await runner.turn_log.append(lease.turn_id, [
                LoggedEvent(event_id, "text_delta", "{}")])
            assert [e.id for e in await asyncio.wait_for(batch, WAIT)] == [event_id]
        await batches.aclose()  # type: ignore[attr-defined]
