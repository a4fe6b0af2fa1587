"""PostgreSQL away for a moment at the commit: the answer is committed once it is back
(helper "lifecycle4").

A commit that failed without an answer (the connection reset, the server refusing
connections: a database restart of a few seconds) was read back while the lease lasted,
and when the read showed the turn still running (the commit had not landed) the turn
ended ``commit_failed``: the provider's whole answer, paid for, was dropped although the
lease still held and the database was back. The commit is now sent again when the read
shows it did not land (at most ``COMMIT_WRITES`` times; fenced, so it can land once only),
and a late refusal is read back too (an earlier attempt that landed after all).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests import pg_support
from tests.engine.support import make_turn
from tests.tcp_proxy import TcpProxy, proxied, proxied_dsn, upstream_of
from turnstate.emulators._scripted import ScriptedBackend, ScriptStep
from turnstate.engine import TurnEngine
from turnstate.storage import PostgresStore, TurnStatus

WAIT = 30.0  # a bound for a hang only
SCHEMA = f"{pg_support.SCHEMA}_l4commit"


class FailingCommits(PostgresStore):
    """Notes each commit that failed (the test's event that the outage was met)."""

    failed: asyncio.Event

    async def commit_turn(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return await super().commit_turn(*args, **kwargs)
        except Exception:
            self.failed.set()
            raise


@pytest.fixture
async def proxy(pg_schema: str) -> AsyncIterator[TcpProxy]:
    async with proxied(*upstream_of(pg_support.DSN)) as opened:
        yield opened


async def test_a_commit_that_met_an_outage_lands_once_the_database_is_back(
        proxy: TcpProxy) -> None:
    dsn = proxied_dsn(pg_support.DSN, proxy)
    async with FailingCommits.open(dsn, schema=SCHEMA, pool_max=4) as store:
        store.failed = asyncio.Event()
        chat = await store.create_chat(owner="alice")
        backend = ScriptedBackend()
        gate = asyncio.Event()
        backend.push("openai", ScriptStep.reply("the whole answer", chunks=2, gate=gate))
        engine = TurnEngine(store, backend.adapters(), backend, lease_seconds=30)
        seen = []

        async def consume() -> None:
            async for event in engine.run_turn(chat.id, make_turn("hello", tools=())):
                seen.append(event)
                if event.type == "text_delta" and not gate.is_set():
                    await proxy.refuse()  # the database goes away ...
                    proxy.cut()
                    gate.set()  # ... as the provider finishes its answer

        consumer = asyncio.ensure_future(consume())
        try:
            await asyncio.wait_for(store.failed.wait(), WAIT)  # the commit met the outage
            await proxy.flow()  # the database is back
            await asyncio.wait_for(consumer, WAIT)
        finally:
            consumer.cancel()
            await proxy.flow()
        final = seen[-1]
        assert final.type == "turn_completed", final
        record = await store.load_turn(final.turn_id)
        assert record.status is TurnStatus.COMPLETED
        history = await store.load_history(chat.id)
        assert [m.text() for m in history] == ["hello", "the whole answer"]
        assert (await store.load_chat(chat.id)).active_turn_id is None
