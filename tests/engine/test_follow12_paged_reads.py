"""A follower reads the turn's log in bounded pages (helper "follow12").

A follower of a turn not running here read the log after its id without a limit: a
resume from 0 of a finished turn held the whole log, as ``LoggedEvent``s, while its
client read nothing (a 49,000-delta log: about 10 MiB a resume; eight stalled resumes
one after another held 99 MiB, SQLite). Now every read of the log takes at most
``PAGE_EVENTS`` events (the first page, a follower's own reads, the hub's), and the
turn's end is judged only on a page that reaches the log's end: a page short of it is
never taken for the whole log (a dead node's turn, ``lease_expired``, gets its end
rebuilt only after every logged event).
"""

from __future__ import annotations

import asyncio
import json
import tracemalloc
import uuid
from collections.abc import AsyncIterator, Iterable
from datetime import timedelta
from typing import Any

import pytest

from tests import pg_support
from tests.engine.conftest import _env
from tests.engine.support import Env, FakeClock
from turnstate.core._conversation import TextPart
from turnstate.engine import _follow, _follow_hub
from turnstate.engine._follow import REBUILT_FINAL_ID, Following
from turnstate.storage import (
    MemoryStore,
    PostgresStore,
    SqliteStore,
    TurnStart,
    _postgres_log,
    _sqlite_log,
)
from turnstate.storage._protocol import TurnLease
from turnstate.storage._store_records import TurnAbort
from turnstate.storage._turn_log import STORED_EVENTS, LogBatch, LoggedEvent, turn_log_of

LEASE = 30.0
PAGE = 4
"""``PAGE_EVENTS`` in the boundary tests: a log of a few events spans pages."""


async def _open(kind: str, clock: FakeClock, request: pytest.FixtureRequest,
                ) -> AsyncIterator[Env]:
    if kind == "memory":
        yield await _env(MemoryStore(clock=clock), clock)
    elif kind == "sqlite":
        async with SqliteStore.open(":memory:", clock=clock) as sqlite:
            yield await _env(sqlite, clock)
    else:
        request.getfixturevalue("pg_schema")
        async with PostgresStore.open(pg_support.DSN, schema=pg_support.SCHEMA,
                                      pool_max=2, clock=clock) as postgres:
            yield await _env(postgres, clock)


@pytest.fixture(params=["memory", "sqlite", "postgres"])
async def any_env(request: pytest.FixtureRequest) -> AsyncIterator[Env]:
    async for env in _open(request.param, FakeClock(), request):
        env.engine.detached.configure(stop_poll_seconds=0.01)
        yield env


@pytest.fixture
def small_pages(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_follow_hub, "PAGE_EVENTS", PAGE)
    monkeypatch.setattr(_follow, "PAGE_EVENTS", PAGE)


def _delta(event_id: int) -> LoggedEvent:
    return LoggedEvent(event_id, "text_delta", json.dumps({"type": "text_delta",
                                                            "text": f"w{event_id} "}))


def _final(event_id: int) -> LoggedEvent:
    return LoggedEvent(event_id, "turn_aborted", json.dumps({"type": "turn_aborted",
                                                             "reason": "cancelled"}))


async def _begin(env: Env) -> tuple[TurnLease, str]:
    """A turn begun by a node (one id a test: PostgreSQL's schema is the run's)."""
    turn_id = f"long-{uuid.uuid4().hex}"
    return await env.store.begin_turn(env.chat_id, TurnStart(
        turn_id=turn_id, user_parts=(TextPart(text="hello?"),), provider="openai",
        model="gpt-4o", lease_seconds=LEASE)), turn_id


async def _log(env: Env, turn_id: str, events: Iterable[LoggedEvent], batch: int = 3) -> None:
    """Append ``events`` in writes of ``batch`` events, as a node's writer does."""
    events = list(events)
    log = turn_log_of(env.store)
    for start in range(0, len(events), batch):
        await log.append(turn_id, events[start:start + batch])


async def _end(env: Env, lease: TurnLease, how: str) -> None:
    """End the turn: its node logged its final event and aborted it (``final``), or the
    node died and the sweep ended it (``lease_expired``: nobody logs its end)."""
    if how == "final":
        await env.store.abort_turn(lease, TurnAbort(reason="cancelled"))
    else:
        env.clock.advance(seconds=LEASE)
        assert await env.engine.detached.reclaim() == 1


async def _rest(batches: AsyncIterator[tuple[LoggedEvent, ...]]) -> list[LoggedEvent]:
    got: list[LoggedEvent] = []
    async for batch in batches:
        assert batch and len(batch) <= PAGE  # never empty, never more than a page
        got.extend(batch)
    return got


def _check_ids(got: list[LoggedEvent], after: int, logged: int, final_id: int) -> None:
    """Every logged event after ``after`` once, in order, then the final event last."""
    assert [e.id for e in got] == [*range(after + 1, logged + 1), final_id]
    assert [e.final for e in got] == [False] * (len(got) - 1) + [True]


@pytest.mark.usefixtures("small_pages")
@pytest.mark.parametrize("pages", [(3, 0), (3, 1), (1, 0)], ids=["k", "k+1", "one"])
@pytest.mark.parametrize("how", ["final", "lease_expired"])
async def test_an_ended_turn_s_log_of_k_pages_or_one_more_event_comes_whole(
        any_env: Env, pages: tuple[int, int], how: str) -> None:
    env = any_env
    count = pages[0] * PAGE + pages[1]  # the events of the log, its final one included
    lease, turn = await _begin(env)
    if how == "final":
        await _log(env, turn, [*map(_delta, range(1, count)), _final(count)])
    else:  # its node died having logged ``count`` events
        await _log(env, turn, map(_delta, range(1, count + 1)))
    await _end(env, lease, how)
    final_id = count if how == "final" else REBUILT_FINAL_ID
    for after in sorted({0, 1, PAGE, count - 1} - {count}):
        following = await env.engine.follow(env.chat_id, turn, after=after)
        assert following.notice is None
        got = await asyncio.wait_for(_rest(following.batches), 10)
        _check_ids(got, after, count if how == "lease_expired" else count - 1, final_id)


@pytest.mark.usefixtures("small_pages")
async def test_followers_joining_at_once_page_through_together(any_env: Env) -> None:
    """Followers from several ids (some past the first read's page) share the hub's
    pages; each gets every event after its id once, and the end rebuilt once."""
    env = any_env
    count = 5 * PAGE + 2
    lease, turn = await _begin(env)
    await _log(env, turn, map(_delta, range(1, count + 1)))
    await _end(env, lease, "lease_expired")
    afters = [0, 0, 1, 3, PAGE, PAGE + 2, 3 * PAGE, count]
    followings = await asyncio.gather(*(env.engine.follow(env.chat_id, turn, after=a)
                                        for a in afters))
    got = await asyncio.wait_for(asyncio.gather(*(_rest(f.batches) for f in followings)), 10)
    for after, events in zip(afters, got, strict=True):
        _check_ids(events, after, count, REBUILT_FINAL_ID)
    assert not _follow_hub._HUBS and not _follow_hub._READS


@pytest.mark.usefixtures("small_pages")
@pytest.mark.parametrize("how", ["final", "lease_expired"])
async def test_a_turn_that_ends_while_its_follower_pages_ends_after_every_event(
        any_env: Env, how: str) -> None:
    """The follower has its first page when the turn ends with two pages and more still
    unread: it gets them all before the end (a dead node's end was rebuilt at the
    first page that saw the turn ended, dropping the events after it)."""
    env = any_env
    lease, turn = await _begin(env)
    logged = 3 * PAGE - 1
    await _log(env, turn, map(_delta, range(1, logged + 1)))
    following = await env.engine.follow(env.chat_id, turn)
    batches = following.batches
    first = list(await anext(batches))
    assert [e.id for e in first] == list(range(1, PAGE + 1))
    if how == "final":
        await _log(env, turn, map(_delta, range(logged + 1, logged + 3)))
        logged += 2
        await _log(env, turn, [_final(logged + 1)])
    await _end(env, lease, how)
    rest = await asyncio.wait_for(_rest(batches), 10)
    final_id = logged + 1 if how == "final" else REBUILT_FINAL_ID
    _check_ids(first + rest, 0, logged, final_id)


@pytest.mark.usefixtures("small_pages")
async def test_a_log_expired_while_its_follower_pages_ends_with_its_end_rebuilt(
        any_env: Env) -> None:
    """Retention drops the log while a follower pages through it: the follower gets
    the end rebuilt with the log's last id, once, after the events it had (the events
    between are gone with the log); its notice, given at its start, stays None."""
    env = any_env
    lease, turn = await _begin(env)
    count = 3 * PAGE
    await _log(env, turn, [*map(_delta, range(1, count)), _final(count)])
    await _end(env, lease, "final")
    following = await env.engine.follow(env.chat_id, turn)
    batches = following.batches
    first = list(await anext(batches))
    expired = await turn_log_of(env.store).expire(
        ended_before=env.clock() + timedelta(seconds=1))
    assert expired >= 1  # PostgreSQL: the earlier tests' logs too (the run's schema)
    rest = await asyncio.wait_for(_rest(batches), 10)
    assert following.notice is None
    assert [e.id for e in first + rest] == [*range(1, PAGE + 1), count]
    assert rest[-1].final and rest[-1].type == "turn_aborted"
    # a resume from then on is told the log expired, as before
    late: Following = await env.engine.follow(env.chat_id, turn, after=2)
    assert late.notice == "log_expired"
    assert [e.id for e in await _rest(late.batches)] == [count]


# -- memory ---------------------------------------------------------------------------

WORDS = 12_000
RESUMES = 8
PAGE_EVENTS = 1024
"""``_follow_hub.PAGE_EVENTS``, what a stalled resume holds at most."""
PAGE_BYTES = PAGE_EVENTS * 250
"""About a page of this log (``LoggedEvent``s of some 200 bytes each)."""


@pytest.fixture(params=["sqlite", "postgres"])
async def sql_env(request: pytest.FixtureRequest) -> AsyncIterator[Env]:
    """The stores whose reads make their events anew (the memory store's share its own)."""
    async for env in _open(request.param, FakeClock(), request):
        yield env


async def test_stalled_resumes_one_after_another_hold_about_a_page_each(
        sql_env: Env) -> None:
    env = sql_env
    lease, turn = await _begin(env)
    await _log(env, turn, [*map(_delta, range(1, WORDS)), _final(WORDS)], batch=500)
    await _end(env, lease, "final")
    held: list[Any] = []
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(RESUMES):  # each after the one before has read: none shares a read
            following = await env.engine.follow(env.chat_id, turn)
            batches = following.batches
            held.append((batches, await anext(batches)))  # its client reads no more
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert grown < RESUMES * 2 * PAGE_BYTES, grown  # was the whole log each: 8 x 2.6 MB
    assert all(len(batch) <= PAGE_EVENTS for _, batch in held)
    for batches, _ in held:
        await batches.aclose()


class _CountingUnpack:
    """``unpack_events`` that counts the stored batches a read hands it."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.batches, self.events = inner, 0, 0

    def __call__(self, packed: Iterable[str], after: int, limit: int | None,
                 ) -> tuple[LoggedEvent, ...]:
        packed = list(packed)
        self.batches += len(packed)
        self.events += sum(len(json.loads(text)) for text in packed)
        return self.inner(packed, after, limit)  # type: ignore[no-any-return]


async def test_a_read_with_a_limit_takes_the_batches_that_hold_its_events(
        sql_env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    """A page of 10 events from a log written 100 events a batch reads the one or two
    batches that hold them (it read 10 batches, the whole log here: paging through it
    read the log's rest at each page); where the cap dropped events the page holds fewer,
    never none."""
    env = sql_env
    module = _sqlite_log if isinstance(env.store, SqliteStore) else _postgres_log
    counting = _CountingUnpack(module.unpack_events)
    monkeypatch.setattr(module, "unpack_events", counting)
    lease, turn = await _begin(env)
    await _log(env, turn, map(_delta, range(1, 1001)), batch=100)
    log = turn_log_of(env.store)
    page = await log.read(env.chat_id, turn, after=0, limit=10)
    assert [e.id for e in page.events] == list(range(1, 11)) and counting.batches == 1
    page = await log.read(env.chat_id, turn, after=95, limit=10)
    assert [e.id for e in page.events] == list(range(96, 106)) and counting.batches == 3
    page = await log.read(env.chat_id, turn, after=990, limit=50)
    assert [e.id for e in page.events] == list(range(991, 1001)) and counting.batches == 4
    await log.append(turn, [_final(5000)], truncate=True)  # past the cap: ids skip
    await env.store.abort_turn(lease, TurnAbort(reason="cancelled"))
    page = await log.read(env.chat_id, turn, after=0, limit=10)
    assert [e.id for e in page.events] == [5000]


async def test_a_long_write_is_stored_in_rows_a_page_reads_one_or_two_of(
        sql_env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    """A write of 1,000 events (a turn faster than its node's writer, a write retried
    after an outage) was one row, parsed whole by each page read from it: paging through
    a 49,000-event log written so took 0.7 s of CPU where one read took 0.1 s. It is
    stored in rows of ``STORED_EVENTS``, in the same write (``append_many`` too, two
    turns at once), and reads back the same."""
    env = sql_env
    module = _sqlite_log if isinstance(env.store, SqliteStore) else _postgres_log
    counting = _CountingUnpack(module.unpack_events)
    monkeypatch.setattr(module, "unpack_events", counting)
    _, turn = await _begin(env)
    other_chat = (await env.store.create_chat(owner="alice")).id
    other = await env.store.begin_turn(other_chat, TurnStart(
        turn_id=f"other-{uuid.uuid4().hex}", user_parts=(TextPart(text="hi"),),
        provider="openai", model="gpt-4o", lease_seconds=LEASE))
    log = turn_log_of(env.store)
    await log.append(turn, [_delta(i) for i in range(1, 1001)])
    outcomes = await log.append_many([
        LogBatch(other.turn_id, tuple(map(_delta, range(1, 601)))),
        LogBatch(turn, tuple(map(_delta, range(1001, 1601))))])
    assert outcomes == (None, None)
    page = await log.read(env.chat_id, turn, after=500, limit=10)
    assert [e.id for e in page.events] == list(range(501, 511))
    assert counting.events <= STORED_EVENTS  # was the write's 1,000
    whole = await log.read(env.chat_id, turn)
    assert [e.id for e in whole.events] == list(range(1, 1601)) and whole.last_id == 1600
    assert whole.events[1234] == _delta(1235)
    theirs = await log.read(other_chat, other.turn_id, after=599)
    assert [e.id for e in theirs.events] == [600] and theirs.last_id == 600
