"""Conformance, the turn-events log: appends, reads, stops and retention on every backend."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from tests.storage.support import Backend, abort, commit, start
from turnstate.core._errors import ConfigurationError, StorageError, TurnNotFound
from turnstate.storage import TurnStatus
from turnstate.storage._turn_log import LogBatch, LoggedEvent, turn_log_of, wait_change


def events(first: int, last: int, kind: str = "text_delta") -> list[LoggedEvent]:
    return [LoggedEvent(i, kind, json.dumps({"text": f"d{i}", "type": kind}))
            for i in range(first, last + 1)]


async def running(backend: Backend, chat: str = "c1", turn: str = "t1",
                  owner: str = "alice") -> None:
    await backend.store.create_chat(owner=owner, chat_id=chat)
    await backend.store.begin_turn(chat, start(turn))


async def ended(backend: Backend, turn: str, last: int) -> None:
    """A committed turn of chat ``c1`` that logged events 1 to ``last``."""
    lease = await backend.store.begin_turn("c1", start(turn))
    await turn_log_of(backend.store).append(turn, events(1, last))
    await backend.store.commit_turn(lease, commit())


async def test_events_come_back_in_order_after_an_id(backend: Backend) -> None:
    """Batches append in id order; a read returns the events above ``after``."""
    await running(backend)
    log = turn_log_of(backend.store)
    await log.append("t1", events(1, 3))
    await log.append("t1", events(4, 5))
    page = await log.read("c1", "t1", after=2, owner="alice")
    assert [e.id for e in page.events] == [3, 4, 5]
    assert page.events[0] == events(3, 3)[0]
    assert page.last_id == 5 and page.turn.status is TurnStatus.IN_PROGRESS
    assert not page.truncated and not page.expired and not page.stop_requested
    assert [e.id for e in (await log.read("c1", "t1", after=0, limit=2)).events] == [1, 2]
    assert (await log.read("c1", "t1", after=5)).events == ()


async def test_a_turn_without_events_reads_empty(backend: Backend) -> None:
    await running(backend)
    page = await turn_log_of(backend.store).read("c1", "t1")
    assert page.events == () and page.last_id == 0


async def test_ids_that_do_not_follow_are_refused_and_nothing_is_written(
        backend: Backend) -> None:
    await running(backend)
    log = turn_log_of(backend.store)
    await log.append("t1", events(1, 3))
    for bad in (events(3, 4), events(2, 2), [*events(4, 4), *events(4, 4)]):
        with pytest.raises(StorageError):
            await log.append("t1", bad)
    page = await log.read("c1", "t1")
    assert [e.id for e in page.events] == [1, 2, 3] and page.last_id == 3


async def test_unknown_foreign_and_misplaced_turns_are_not_found(backend: Backend) -> None:
    """Another owner's turn, or a turn named under another chat, reads as unknown."""
    await running(backend)
    await backend.store.create_chat(owner="bob", chat_id="c2")
    log = turn_log_of(backend.store)
    await log.append("t1", events(1, 1))
    for chat, turn, owner in (("c1", "nope", "alice"), ("c1", "t1", "bob"),
                              ("c2", "t1", "bob"), ("c2", "t1", None), ("zz", "t1", None)):
        with pytest.raises(TurnNotFound):
            await log.read(chat, turn, owner=owner)
        with pytest.raises(TurnNotFound):
            await log.request_stop(chat, turn, owner=owner)
    with pytest.raises(TurnNotFound):
        await log.append("nope", events(1, 1))
    assert not (await log.read("c1", "t1")).stop_requested


async def test_several_turns_append_at_once_each_batch_on_its_own(backend: Backend) -> None:
    """``append_many``: every batch is written as ``append`` would; an unknown turn's or a
    misnumbered batch is refused alone (its error returned), and each turn's readers wake."""
    await running(backend)
    await running(backend, chat="c2", turn="t2")
    log = turn_log_of(backend.store)
    await log.append("t2", events(1, 2))
    marks = [log.signals.next_change(turn) for turn in ("t1", "t2")]
    outcomes = await log.append_many([
        LogBatch("t1", tuple(events(1, 3))), LogBatch("nope", tuple(events(1, 1))),
        LogBatch("t2", tuple(events(2, 2))), LogBatch("t2", tuple(events(3, 3)))])
    assert outcomes[0] is None and outcomes[3] is None
    assert isinstance(outcomes[1], TurnNotFound)
    assert isinstance(outcomes[2], StorageError) and not isinstance(outcomes[2], TurnNotFound)
    assert all(mark.done() for mark in marks)
    assert [e.id for e in (await log.read("c1", "t1")).events] == [1, 2, 3]
    page = await log.read("c2", "t2")
    assert [e.id for e in page.events] == [1, 2, 3] and page.last_id == 3
    truncating = LogBatch("t1", tuple(events(7, 7, "turn_completed")), truncate=True)
    assert await log.append_many([truncating]) == (None,)
    page = await log.read("c1", "t1")
    assert page.truncated and [e.id for e in page.events] == [7] and page.last_id == 7


async def test_truncation_keeps_only_what_follows_it(backend: Backend) -> None:
    """Past the writer's cap, the stored events go; the final one is still written."""
    await running(backend)
    log = turn_log_of(backend.store)
    await log.append("t1", events(1, 4))
    await log.append("t1", events(9, 9, "turn_completed"), truncate=True)
    page = await log.read("c1", "t1")
    assert page.truncated and page.last_id == 9
    assert [(e.id, e.type) for e in page.events] == [(9, "turn_completed")]
    assert page.events[0].final


async def test_a_stop_is_recorded_for_a_running_turn_and_signalled(backend: Backend) -> None:
    await running(backend)
    await backend.store.create_chat(owner="alice", chat_id="c3")
    await backend.store.begin_turn("c3", start("t3"))
    log = turn_log_of(backend.store)
    heard: list[str] = []
    unsubscribe = log.signals.on_stop(heard.append)
    record = await log.request_stop("c1", "t1", owner="alice")
    assert record.status is TurnStatus.IN_PROGRESS and heard == ["t1"]
    assert (await log.read("c1", "t1")).stop_requested
    assert await log.stop_requests(["t1", "t3", "unknown"]) == {"t1"}
    assert await log.stop_requests([]) == frozenset()
    await log.request_stop("c1", "t1")  # twice is once
    assert await log.stop_requests(["t1"]) == {"t1"}
    unsubscribe()


async def test_a_stop_of_a_finished_turn_changes_nothing(backend: Backend) -> None:
    """The record tells the caller how the turn ended; no stop is recorded."""
    await backend.store.create_chat(owner="alice", chat_id="c1")
    lease = await backend.store.begin_turn("c1", start("t1"))
    await backend.store.commit_turn(lease, commit())
    lease = await backend.store.begin_turn("c1", start("t2"))
    await backend.store.abort_turn(lease, abort("provider_failed"))
    log = turn_log_of(backend.store)
    heard: list[str] = []
    log.signals.on_stop(heard.append)
    done = await log.request_stop("c1", "t1", owner="alice")
    failed = await log.request_stop("c1", "t2")
    assert done.status is TurnStatus.COMPLETED and failed.status is TurnStatus.ABORTED
    assert failed.reason == "provider_failed"
    assert heard == [] and await log.stop_requests(["t1", "t2"]) == frozenset()


async def test_retention_expires_the_events_of_ended_turns_only(backend: Backend) -> None:
    await backend.store.create_chat(owner="alice", chat_id="c1")
    await backend.store.create_chat(owner="alice", chat_id="c2")
    log = turn_log_of(backend.store)
    await ended(backend, "old", 2)
    backend.clock.advance(60)
    cutoff = backend.clock()
    backend.clock.advance(60)
    await ended(backend, "new", 2)
    await backend.store.begin_turn("c2", start("live"))
    await log.append("live", events(1, 1))
    assert await log.expire(cutoff) == 1
    old = await log.read("c1", "old")
    assert old.expired and old.events == () and old.last_id == 2
    assert [e.id for e in (await log.read("c1", "new")).events] == [1, 2]
    assert [e.id for e in (await log.read("c2", "live")).events] == [1]
    assert await log.expire(cutoff) == 0


async def test_retention_by_age_reads_the_store_s_clock(backend: Backend) -> None:
    """``expire(older_than=...)``: the turns that ended more than that long ago by the
    clock that wrote their end (the store's); the time form is kept. Neither, both or a
    negative age is a ConfigurationError, and nothing is expired then."""
    await backend.store.create_chat(owner="alice", chat_id="c1")
    log = turn_log_of(backend.store)
    await ended(backend, "old", 2)
    backend.clock.advance(60)
    await ended(backend, "new", 2)
    backend.clock.advance(30)
    for bad in ({}, {"ended_before": backend.clock(), "older_than": timedelta(0)},
                {"older_than": timedelta(seconds=-1)}, {"older_than": 60}):
        with pytest.raises(ConfigurationError):
            await log.expire(**bad)  # type: ignore[arg-type]
    assert await log.expire(older_than=timedelta(seconds=90)) == 0  # ended exactly 90 s ago
    assert await log.expire(older_than=timedelta(seconds=60)) == 1
    assert (await log.read("c1", "old")).expired
    assert [e.id for e in (await log.read("c1", "new")).events] == [1, 2]
    assert await log.expire(older_than=timedelta(0)) == 1
    assert (await log.read("c1", "new")).expired


async def test_deleting_the_chat_deletes_its_turn_logs(backend: Backend) -> None:
    await backend.store.create_chat(owner="alice", chat_id="c1")
    log = turn_log_of(backend.store)
    lease = await backend.store.begin_turn("c1", start("t1"))
    await log.append("t1", events(1, 2))
    await log.request_stop("c1", "t1")
    await backend.store.commit_turn(lease, commit())
    await backend.store.delete_chat("c1")
    with pytest.raises(TurnNotFound):
        await log.read("c1", "t1")
    if backend.name != "memory":  # the SQL backends cascade the delete
        for table in ("turn_event_batches", "turn_logs"):
            assert (await backend.store.fetch_raw(f"SELECT count(*) FROM {table}"))[0][0] == 0


async def test_an_append_wakes_a_reader_that_took_its_mark_before_reading(
        backend: Backend) -> None:
    await running(backend)
    log = turn_log_of(backend.store)
    mark = log.signals.next_change("t1")
    assert (await log.read("c1", "t1")).events == ()
    await log.append("t1", events(1, 1))
    assert await wait_change(mark, 5.0)
    assert not await wait_change(log.signals.next_change("t1"), 0.0)


async def test_text_that_utf8_cannot_hold_round_trips(backend: Backend) -> None:
    """Half of a surrogate pair in an event's text is stored escaped, read back equal."""
    await running(backend)
    log = turn_log_of(backend.store)
    data = json.dumps({"text": "a\ud83d", "type": "text_delta"}, ensure_ascii=False)
    await log.append("t1", [LoggedEvent(1, "text_delta", data)])
    (event,) = (await log.read("c1", "t1")).events
    assert json.loads(event.data) == json.loads(data)


@pytest.mark.parametrize("many", [False, True])
async def test_a_truncation_with_no_events_drops_the_stored_ones(backend: Backend,
                                                                 many: bool) -> None:
    """Past the cap the running turn keeps no events until its final one, so the writer's
    next tick sends the truncation alone (``LiveTurn.after`` is empty): the log drops what
    it holds and says so, as it does with events. Were it ignored, a resume from the log
    on another node would get the old events, then the final one after a gap of ids, with
    no ``log_truncated`` notice."""
    await running(backend)
    log = turn_log_of(backend.store)
    await log.append("t1", events(1, 4))
    mark = log.signals.next_change("t1")
    if many:
        assert await log.append_many([LogBatch("t1", (), truncate=True)]) == (None,)
    else:
        await log.append("t1", [], truncate=True)
    assert mark.done()
    page = await log.read("c1", "t1")
    assert page.truncated and page.events == () and page.last_id == 4
    await log.append("t1", events(9, 9, "turn_completed"))
    page = await log.read("c1", "t1")
    assert page.truncated and [e.id for e in page.events] == [9] and page.last_id == 9


async def test_a_log_expired_once_is_not_expired_again(backend: Backend) -> None:
    """Events appended to an expired log stay, and the next sweep counts none (SQLite's
    schema 8 found the sweep's logs by their batches and expired the log again)."""
    await backend.store.create_chat(owner="alice", chat_id="c1")
    log = turn_log_of(backend.store)
    await ended(backend, "old", 2)
    backend.clock.advance(60)
    assert await log.expire(backend.clock()) == 1
    await log.append("old", events(3, 3))
    assert await log.expire(backend.clock()) == 0
    page = await log.read("c1", "old")
    assert page.expired and [e.id for e in page.events] == [3] and page.last_id == 3


async def test_a_read_resumes_inside_a_write_and_pages_by_events(backend: Backend) -> None:
    """``after`` and ``limit`` count events, whatever writes they came in."""
    await running(backend)
    log = turn_log_of(backend.store)
    for first, last in ((1, 4), (5, 5), (6, 9)):
        await log.append("t1", events(first, last))
    for after in range(11):
        for limit in (None, 1, 2, 3, 5, 20):
            wanted = [i for i in range(after + 1, 10)][:limit]
            page = await log.read("c1", "t1", after=after, limit=limit)
            assert [e.id for e in page.events] == wanted, (after, limit)


async def test_a_turn_s_batches_in_one_call_each_follow_the_last(backend: Backend) -> None:
    """``append_many`` with several batches of one turn writes them as ``append`` in
    turn would: a batch that does not follow the one before it is refused alone, and a
    truncating one drops what the earlier ones wrote (SQLite checked every batch against
    the stored ids only: the store raised ``IntegrityError`` and wrote nothing)."""
    await running(backend)
    log = turn_log_of(backend.store)
    outcomes = await log.append_many([LogBatch("t1", tuple(events(1, 2))),
                                      LogBatch("t1", tuple(events(2, 3))),
                                      LogBatch("t1", tuple(events(3, 3)))])
    assert [type(o) for o in outcomes][0::2] == [type(None)] * 2
    assert isinstance(outcomes[1], StorageError)
    page = await log.read("c1", "t1")
    assert [e.id for e in page.events] == [1, 2, 3] and page.last_id == 3
    assert await log.append_many([LogBatch("t1", tuple(events(4, 5))),
                                  LogBatch("t1", tuple(events(6, 6)), truncate=True)]
                                 ) == (None, None)
    page = await log.read("c1", "t1")
    assert page.truncated and [e.id for e in page.events] == [6] and page.last_id == 6


async def test_a_read_takes_at_most_limit_events_and_refuses_a_negative_one(
        backend: Backend) -> None:
    """hunt-life: ``limit=0`` is no events (the memory store returned them all, as for
    None), and a negative limit is refused as the listings refuse it (the memory store
    and SQLite dropped the last event, as a Python slice does; PostgreSQL failed with a
    bare ``StorageError`` from the server)."""
    await running(backend)
    log = turn_log_of(backend.store)
    await log.append("t1", events(1, 3))
    assert (await log.read("c1", "t1", limit=0)).events == ()
    with pytest.raises(ConfigurationError):
        await log.read("c1", "t1", limit=-1)
