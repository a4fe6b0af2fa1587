"""Database outages without touching the database: a loopback proxy (``TcpProxy``)
between the store and PostgreSQL refuses, black-holes (accepts, never answers), cuts or
pauses the connections while a store call or a turn is under way.

What must hold: every await on the database is bounded (a silent server is a typed error
after ``command_timeout``, never a hang), the pool recovers once the server answers
again, a renewal retried within the lease rides out a short pause, a commit whose reply
was lost is reported as it landed, and a node whose lease ran out during the outage
never commits over the turn that took the chat.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest

from tests import pg_support
from tests.engine.support import collect, make_turn, tool
from tests.tcp_proxy import TcpProxy, proxied, proxied_dsn, upstream_of
from turnstate.core._errors import ChatBusy, StorageTimeout, StorageUnavailable
from turnstate.emulators._scripted import ScriptedBackend, ScriptStep
from turnstate.engine import TurnEngine
from turnstate.storage import PostgresStore, TurnStatus
from turnstate.storage import _postgres_log as pg_log
from turnstate.storage._turn_log import LogBatch, turn_log_of

SCHEMA = f"{pg_support.SCHEMA}_outage"
BOUND = 1.5  # the store's command_timeout in these tests
DEADLINE = 8.0  # every wait of a test fails clearly after this


@pytest.fixture
async def proxy(pg_schema: str) -> AsyncIterator[TcpProxy]:
    async with proxied(*upstream_of(pg_support.DSN)) as tcp:
        yield tcp


def _open(proxy: TcpProxy, **options: Any) -> Any:
    chosen = {"statement_timeout": 1.0, "command_timeout": BOUND, "acquire_timeout": BOUND,
              "pool_max": 2, **options}
    return PostgresStore.open(proxied_dsn(pg_support.DSN, proxy), schema=SCHEMA, **chosen)


async def test_a_silent_server_is_a_typed_error_in_bounded_time_and_the_pool_recovers(
        proxy: TcpProxy) -> None:
    """Black-holed: a read is ``StorageTimeout``, a write ``StorageUnavailable`` (it may
    have landed), each after about ``command_timeout`` (before: both waited forever,
    and a caller's cancel waited on asyncpg's cancel request, sent into the same hole).
    Once the proxy forwards again the same store serves at once."""
    async with _open(proxy, pool_min=2) as store:  # two open connections to go silent on
        chat = await store.create_chat(owner="alice")
        proxy.black_hole()
        for call, error in ((store.load_chat(chat.id), StorageTimeout),
                            (store.create_chat(owner="alice"), StorageUnavailable)):
            started = time.monotonic()
            async with asyncio.timeout(DEADLINE):
                with pytest.raises(error, match=r"no answer from PostgreSQL within 1\.5 s"):
                    await call
            assert time.monotonic() - started < BOUND + 2.0
        reader = asyncio.ensure_future(store.load_chat(chat.id))
        await asyncio.wait_for(proxy.attempted.wait(), DEADLINE)
        reader.cancel()  # a caller that gives up is let go at once
        async with asyncio.timeout(1.0):
            with pytest.raises(asyncio.CancelledError):
                await reader
        await proxy.flow()
        async with asyncio.timeout(DEADLINE):
            assert (await store.load_chat(chat.id)).id == chat.id
            await store.create_chat(owner="alice")


async def test_a_refused_begin_is_unavailable_and_leaves_nothing(proxy: TcpProxy) -> None:
    """Refused connections (the server's port closed) during a begin: the turn is
    refused ``StorageUnavailable`` before any provider call, nothing is written, and
    the chat takes a turn as soon as the server is back."""
    backend = ScriptedBackend()
    async with _open(proxy) as store:
        engine = TurnEngine(store, backend.adapters(), backend, lease_seconds=5.0)
        chat = await store.create_chat(owner="alice")
        proxy.cut()  # the pooled connections go, and no new one can be made
        await proxy.refuse()
        async with asyncio.timeout(DEADLINE):
            with pytest.raises(StorageUnavailable):
                await collect(engine.run_turn(chat.id, make_turn("refused")))
        assert backend.requests == []
        await proxy.flow()
        async with asyncio.timeout(DEADLINE):
            backend.push("openai", ScriptStep.reply("back"))
            assert (await collect(engine.run_turn(chat.id, make_turn("again")))).committed
            assert [m.text() for m in await store.load_history(chat.id)] == ["again", "back"]


async def test_renewals_ride_out_a_four_second_pause_and_the_turn_commits(
        proxy: TcpProxy) -> None:
    """The server stops answering for 4 s (a restart's length) while a turn runs a tool
    under a 7 s lease renewed every second: renewals are retried within the lease, the
    lease is kept, the turn commits, and the chat is free right after."""
    backend = ScriptedBackend()
    async with _open(proxy, statement_timeout=5.0, command_timeout=5.5) as store:
        engine = TurnEngine(store, backend.adapters(), backend, lease_seconds=7.0,
                            heartbeat_seconds=1.0)
        chat = await store.create_chat(owner="alice")
        paused_at: list[float] = []

        async def during_pause(_: dict[str, Any]) -> Any:
            proxy.pause()
            paused_at.append(time.monotonic())
            await proxy.attempted.wait()  # a renewal was sent into the pause
            await asyncio.sleep(4.0 - (time.monotonic() - paused_at[0]))  # the outage
            await proxy.flow()
            return "done"

        backend.push("openai", ScriptStep.call(("wait", {"city": "x"})), ScriptStep.reply("ok"))
        async with asyncio.timeout(DEADLINE + 4):
            outcome = await collect(engine.run_turn(chat.id, make_turn(
                "a", tools=(tool("wait", during_pause, timeout=60),))))
        assert outcome.committed, outcome.final
        after = await store.load_chat(chat.id)
        assert after.active_turn_id is None and after.last_provider_state is not None


async def test_a_renewal_stuck_on_a_dead_connection_is_retried_on_a_new_one(
        proxy: TcpProxy) -> None:
    """The pool's connections go silent (a middlebox forgot them) while new connections
    work. A renewal sent on a dead one is given up after a heartbeat interval and sent
    again on a new connection, within the lease (before: it waited for the store's
    ``command_timeout``, longer than the lease, and the turn lost its lease though the
    database was there all along). One connection, so the one that goes silent is the
    one the renewal takes."""
    backend = ScriptedBackend()
    async with _open(proxy, statement_timeout=5.0, command_timeout=6.0, pool_max=1) as store:
        engine = TurnEngine(store, backend.adapters(), backend, lease_seconds=3.0,
                            heartbeat_seconds=1.0)
        chat = await store.create_chat(owner="alice")
        renewed = asyncio.Event()
        original = store.renew_lease

        async def renew_lease(*args: Any, **kwargs: Any) -> Any:
            renewal = await original(*args, **kwargs)
            if proxy.attempted.is_set():  # answered after one went into the silence
                renewed.set()
            return renewal

        store.renew_lease = renew_lease  # type: ignore[method-assign]

        async def during_silence(_: dict[str, Any]) -> Any:
            proxy.silence_open()
            await renewed.wait()
            return "done"

        backend.push("openai", ScriptStep.call(("wait", {"city": "x"})), ScriptStep.reply("ok"))
        async with asyncio.timeout(DEADLINE):
            outcome = await collect(engine.run_turn(chat.id, make_turn(
                "a", tools=(tool("wait", during_silence, timeout=60),))))
        assert outcome.committed, outcome.final
        assert (await store.load_chat(chat.id)).active_turn_id is None


async def test_a_commit_whose_reply_was_lost_is_reported_as_it_landed(
        proxy: TcpProxy) -> None:
    """The commit reaches the server, which commits; its answer never comes back (the
    server's side black-holed). After ``command_timeout`` the engine reads the turn back
    and reports it completed; the chat is free and its history whole. (One connection,
    warmed by a first turn: asyncpg prepares a statement in a round trip of its own
    before it sends it, and a commit whose preparing went unanswered never landed.)"""
    backend = ScriptedBackend()
    async with _open(proxy, pool_max=1) as store:
        engine = TurnEngine(store, backend.adapters(), backend, lease_seconds=5.0)
        chat = await store.create_chat(owner="alice")
        backend.push("openai", ScriptStep.reply("warm"))
        assert (await collect(engine.run_turn(chat.id, make_turn("first")))).committed
        original = store.commit_turn

        async def deaf_commit(*args: Any, **kwargs: Any) -> Any:
            proxy.deaf()
            try:
                return await original(*args, **kwargs)
            finally:
                await proxy.flow()

        store.commit_turn = deaf_commit  # type: ignore[method-assign]
        backend.push("openai", ScriptStep.reply("landed"))
        async with asyncio.timeout(DEADLINE):
            outcome = await collect(engine.run_turn(chat.id, make_turn("q")))
        assert outcome.committed, (outcome.final.reason, outcome.final.detail)
        record = await store.load_turn(outcome.final.turn_id)
        assert record.status is TurnStatus.COMPLETED
        assert (await store.load_chat(chat.id)).active_turn_id is None
        texts = [m.text() for m in await store.load_history(chat.id)]
        assert texts == ["first", "warm", "q", "landed"], texts


async def test_a_log_write_whose_reply_was_lost_does_not_stop_the_log(
        proxy: TcpProxy) -> None:
    """A detached turn's event-log write lands but its answer is lost (the server's side
    goes deaf for that write); the writer sends those events again. The log must take
    the repeat and go on to the final event, so a resumer on any node gets the whole
    answer and its end. (One connection, warmed by a first turn, as for the commit.)"""
    backend = ScriptedBackend()
    async with _open(proxy, pool_max=1) as store:
        engine = TurnEngine(store, backend.adapters(), backend, lease_seconds=5.0)
        chat = await store.create_chat(owner="alice")
        backend.push("openai", ScriptStep.reply("warm"))
        live = await engine.start_turn(chat.id, make_turn("first"))
        await engine.detached.settled()
        log = turn_log_of(store)
        original, deaf_write = log.append_many, asyncio.Event()

        async def append_many(batches: Sequence[LogBatch]) -> Any:
            if deaf_write.is_set():
                return await original(batches)
            proxy.deaf()
            try:
                return await original(batches)
            finally:
                await proxy.flow()
                deaf_write.set()

        log.append_many = append_many  # type: ignore[method-assign]
        gate = asyncio.Event()
        backend.push("openai", ScriptStep.reply("one two three", chunks=3, gate=gate))
        async with asyncio.timeout(DEADLINE):
            live = await engine.start_turn(chat.id, make_turn("q"))
            await deaf_write.wait()
            gate.set()
            await engine.detached.settled()
            page = await log.read(chat.id, live.turn_id)
        ids = [event.id for event in page.events]
        assert ids == list(range(1, len(ids) + 1)) and page.events[-1].final, [
            (e.id, e.type) for e in page.events]
        assert page.events[-1].type == "turn_completed"


async def test_a_node_cut_off_past_its_lease_never_commits_over_the_new_owner(
        proxy: TcpProxy) -> None:
    """Node A (through the proxy) runs a tool when its database goes silent; its lease
    (2 s) runs out, node B (a direct connection) takes the chat and commits. When A's
    database answers again A ends ``lease_lost`` and writes nothing over B's turn."""
    backend = ScriptedBackend()
    async with _open(proxy) as store_a, \
            PostgresStore.open(pg_support.DSN, schema=SCHEMA) as store_b:
        node_a = TurnEngine(store_a, backend.adapters(), backend, lease_seconds=2.0,
                            heartbeat_seconds=0.5)
        node_b = TurnEngine(store_b, backend.adapters(), backend, lease_seconds=2.0)
        chat = await store_b.create_chat(owner="alice")
        started = asyncio.Event()

        async def long_tool(_: dict[str, Any]) -> Any:
            started.set()
            await asyncio.Event().wait()

        backend.push("openai", ScriptStep.call(("slow", {"city": "x"})))  # A gets no further
        turn_a = asyncio.ensure_future(collect(node_a.run_turn(chat.id, make_turn(
            "from a", tools=(tool("slow", long_tool, timeout=60),)))))
        async with asyncio.timeout(DEADLINE):
            await started.wait()
            proxy.black_hole()
            backend.push("openai", ScriptStep.reply("b"))  # ChatBusy comes before a request
            while True:  # the lease's expiry is a wall-clock fact of the database
                try:
                    outcome_b = await collect(node_b.run_turn(chat.id, make_turn("from b")))
                    break
                except ChatBusy:
                    await asyncio.sleep(0.1)
        assert outcome_b.committed, outcome_b.final
        await proxy.flow()
        async with asyncio.timeout(DEADLINE):
            outcome_a = await turn_a
        assert outcome_a.final.reason == "lease_lost", outcome_a.final  # type: ignore[union-attr]
        texts = [m.text() for m in await store_b.load_history(chat.id)]
        assert texts == ["from b", "b"], texts
        record_a = await store_b.load_turn(outcome_a.final.turn_id)
        assert record_a.status is TurnStatus.ABORTED
        assert (await store_b.load_chat(chat.id)).active_turn_id is None


async def test_listening_on_a_silent_server_is_one_bounded_attempt(
        proxy: TcpProxy, monkeypatch: pytest.MonkeyPatch) -> None:
    """The listening connection (notifications) opened while the server is silent:
    turns starting meanwhile share one attempt, which gives up after ``LISTEN_SECONDS``
    (before: each waited for asyncpg's 60 s connect timeout, or forever once connected,
    and each opened a connection of its own)."""
    monkeypatch.setattr(pg_log, "LISTEN_SECONDS", 0.5, raising=False)
    async with _open(proxy) as store:
        proxy.black_hole()
        before = proxy.accepted
        async with asyncio.timeout(DEADLINE):
            results = await asyncio.gather(*(store.turn_log.listen() for _ in range(3)))
        assert results == [False, False, False]
        assert proxy.accepted == before + 1
        await proxy.flow()
        assert not store.turn_log.listening


pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")
