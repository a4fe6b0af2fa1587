"""Starting a node reclaims the leases that ran out while no node renewed them (issue 20):
with 30 s leases, that frees a crashed node's chats at most one lease after the crash."""

from __future__ import annotations

import asyncio
import io
from datetime import UTC, datetime, timedelta
from pathlib import Path

from turnstate.server._config import create_tokens_file
from turnstate.server._serve import ServeOptions, serve
from turnstate.storage import SqliteStore, TurnStart, TurnStatus


async def test_starting_a_node_reclaims_an_expired_lease(tmp_path: Path) -> None:
    db, tokens = tmp_path / "chats.db", tmp_path / "tokens"
    create_tokens_file(tokens)
    crashed_at = datetime.now(UTC) - timedelta(minutes=1)  # its 30 s lease ran out since
    async with SqliteStore.open(db, clock=lambda: crashed_at) as store:
        chat = await store.create_chat(owner="local")
        await store.begin_turn(chat.id, TurnStart(turn_id="t1", user_parts=(),
                                                  provider="openai", model="gpt-4o"))
    stop, out = asyncio.Event(), io.StringIO()
    stop.set()  # start, report, and shut down at once
    options = ServeOptions(host="127.0.0.1", port=0, db=str(db), tokens=tokens)
    assert await serve(options, out=out, err=io.StringIO(), stop=stop) == 0
    assert "1 stale lease(s) reclaimed" in out.getvalue(), out.getvalue()
    async with SqliteStore.open(db) as store:
        assert (await store.load_chat(chat.id)).active_turn_id is None
        turn = await store.load_turn("t1")
        assert (turn.status, turn.reason) == (TurnStatus.ABORTED, "lease_expired")
