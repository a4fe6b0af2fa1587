"""Conformance, the turn-events log's fence: a node frozen past its lease (SIGSTOP, then
SIGCONT) cannot append to its turn's log once another node reclaimed the turn, on every
backend. Before, the record said ``lease_expired`` and the log then took the stale
holder's later events and its own ``turn_aborted`` / ``lease_lost`` ending."""

from __future__ import annotations

import json

import pytest

from tests.storage.support import Backend, abort, commit, start
from turnstate.storage import TurnStatus
from turnstate.storage._release import release_chat
from turnstate.storage._turn_log import (
    LogBatch,
    LoggedEvent,
    TurnLogFenced,
    turn_log_of,
)


def event(event_id: int, kind: str = "text_delta") -> LoggedEvent:
    return LoggedEvent(event_id, kind, json.dumps({"type": kind}))


async def _stale(backend: Backend, how: str) -> None:
    """Turn t1 of chat c1 logged event 1, then lost its lease: ``takeover`` (t2's begin
    after it ran out), ``sweep`` (``reclaim_expired``) or ``release`` (an operator)."""
    store = backend.store
    await store.create_chat(owner="alice", chat_id="c1")
    await store.begin_turn("c1", start("t1", lease_seconds=10))
    await turn_log_of(store).append("t1", [event(1)])
    if how == "release":
        await release_chat(store, "c1")
        return
    backend.clock.advance(11)
    if how == "takeover":
        await store.begin_turn("c1", start("t2", lease_seconds=10))
    else:
        assert await store.reclaim_expired() == 1


@pytest.mark.parametrize("how", ["takeover", "sweep", "release"])
async def test_a_stale_holder_cannot_append_to_its_turns_log(backend: Backend,
                                                              how: str) -> None:
    """Once the turn's lease was taken from it, its holder's appends are refused with
    ``TurnLogFenced`` (a batch of ``append_many`` gets it as its outcome, the others are
    written), truncations too, and the log keeps only what came before."""
    await _stale(backend, how)
    store, log = backend.store, turn_log_of(backend.store)
    record = await store.load_turn("t1")
    assert record.status is TurnStatus.ABORTED
    with pytest.raises(TurnLogFenced) as caught:
        await log.append("t1", [event(2)])
    assert caught.value.turn_id == "t1" and caught.value.reason == record.reason
    with pytest.raises(TurnLogFenced):
        await log.append("t1", [event(2, "turn_aborted")], truncate=True)
    await store.create_chat(owner="alice", chat_id="c9")
    await store.begin_turn("c9", start("t9"))
    outcomes = await log.append_many([LogBatch("t1", (event(2),)),
                                      LogBatch("t9", (event(1),)),
                                      LogBatch("t1", (), truncate=True)])
    assert isinstance(outcomes[0], TurnLogFenced) and outcomes[1] is None
    assert isinstance(outcomes[2], TurnLogFenced)
    page = await log.read("c1", "t1")
    assert [e.id for e in page.events] == [1] and page.last_id == 1 and not page.truncated
    assert [e.id for e in (await log.read("c9", "t9")).events] == [1]


async def test_the_holders_own_ending_is_logged(backend: Backend) -> None:
    """A turn ended by its own node, committed or aborted (``lease_lost`` too, when its
    lease ran out and nobody took the chat), logs its final event after its end."""
    store, log = backend.store, turn_log_of(backend.store)
    await store.create_chat(owner="alice", chat_id="c1")
    lease = await store.begin_turn("c1", start("t1"))
    await log.append("t1", [event(1)])
    await store.commit_turn(lease, commit())
    await log.append("t1", [event(2, "turn_completed")])
    lease = await store.begin_turn("c1", start("t2", lease_seconds=10))
    backend.clock.advance(11)  # ran out on its node (``LeaseKeeper``); nobody took the chat
    await store.abort_turn(lease, abort("lease_lost"))
    await log.append("t2", [event(1, "turn_aborted")])
    assert [e.type for e in (await log.read("c1", "t2")).events] == ["turn_aborted"]
    assert [e.type for e in (await log.read("c1", "t1")).events] == [
        "text_delta", "turn_completed"]
