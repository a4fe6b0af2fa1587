"""Conformance, part 3: leases, conflicts, expiry and reclaim, on every backend."""

from __future__ import annotations

import logging

import pytest

from tests.storage.support import (
    TRANSITION,
    Backend,
    abort,
    commit,
    committed_turn,
    cursor_of,
    start,
)
from turnstate.core._conversation import MessageStatus, TextPart
from turnstate.core._errors import ChatBusy, ChatNotFound, CommitConflict
from turnstate.storage import TurnStatus


async def _snapshot(backend: Backend, chat_id: str) -> tuple[object, ...]:
    store = backend.store
    return (await store.load_chat(chat_id), await store.list_messages(chat_id),
            await store.list_turns(chat_id))


async def test_second_turn_on_live_lease_is_busy_before_writing(backend: Backend) -> None:
    """A begin on a chat with a live lease raises ChatBusy and writes nothing."""
    store = backend.store
    await store.create_chat(owner="alice", chat_id="c1")
    await store.begin_turn("c1", start("t1", lease_seconds=60))
    before = await _snapshot(backend, "c1")
    backend.clock.advance(59)
    with pytest.raises(ChatBusy) as caught:
        await store.begin_turn("c1", start("t2"))
    assert (caught.value.chat_id, caught.value.active_turn_id) == ("c1", "t1")
    assert await _snapshot(backend, "c1") == before


async def test_version_conflict_writes_nothing(backend: Backend) -> None:
    """A change of the chat during a turn (its cursor cleared) makes the turn's commit
    raise CommitConflict, and nothing is written."""
    store = backend.store
    await store.create_chat(owner="alice", chat_id="c1")
    await committed_turn(store, "c1", "t1", cursor="resp_1")
    lease = await store.begin_turn("c1", start("t2"))
    await store.clear_provider_state("c1", reason="test")
    before = await _snapshot(backend, "c1")
    with pytest.raises(CommitConflict) as caught:
        await store.commit_turn(lease, commit("resp_2"))
    conflict = caught.value
    assert (conflict.chat_id, conflict.expected_version, conflict.actual_version) == ("c1", 1, 2)
    assert await _snapshot(backend, "c1") == before
    chat = await store.load_chat("c1")
    assert (chat.active_turn_id, chat.last_provider_state) == ("t2", None)
    await store.abort_turn(lease, abort("commit_conflict"))
    assert (await store.load_turn("t2")).reason == "commit_conflict"
    assert (await store.load_chat("c1")).active_turn_id is None


async def test_an_edit_or_delete_under_a_live_lease_is_busy_and_writes_nothing(
        backend: Backend) -> None:
    """A message's edit or delete while a turn holds the chat is ChatBusy, checked in the
    write itself (after the owner, before the message), and writes nothing; the turn
    then commits. Once the lease has run out the edit goes through."""
    store = backend.store
    await store.create_chat(owner="alice", chat_id="c1")
    await committed_turn(store, "c1", "t1", cursor="resp_1")
    lease = await store.begin_turn("c1", start("t2", lease_seconds=10))
    before = await _snapshot(backend, "c1")
    for change in (lambda: store.edit_message("c1", 1, (TextPart(text="edited"),)),
                   lambda: store.edit_message("c1", 1, (), owner="alice"),
                   lambda: store.edit_message("c1", 99, ()),
                   lambda: store.delete_message("c1", 2)):
        with pytest.raises(ChatBusy) as caught:
            await change()
        assert (caught.value.chat_id, caught.value.active_turn_id) == ("c1", "t2")
    with pytest.raises(ChatNotFound):
        await store.edit_message("c1", 1, (), owner="mallory")
    assert await _snapshot(backend, "c1") == before
    assert (await store.commit_turn(lease, commit("resp_2"))).version == 2
    await store.begin_turn("c1", start("t3", lease_seconds=10))
    backend.clock.advance(10)
    await store.edit_message("c1", 1, (TextPart(text="edited"),))
    assert (await store.load_history("c1"))[0].text() == "edited"


async def test_lease_expires_exactly_at_its_end(backend: Backend) -> None:
    """A lease is live until its expiry and expired from that instant on."""
    store = backend.store
    await store.create_chat(owner="alice", chat_id="c1")
    await store.begin_turn("c1", start("t1", lease_seconds=10))
    backend.clock.advance(9.999999)
    with pytest.raises(ChatBusy):
        await store.begin_turn("c1", start("t2"))
    backend.clock.advance(0.000001)
    lease = await store.begin_turn("c1", start("t2"))
    assert lease.user_seq == 3


async def test_begin_on_expired_lease_reclaims_it(
    backend: Backend, caplog: pytest.LogCaptureFixture
) -> None:
    """A begin on an expired lease aborts the stale turn, then starts its own, in one step."""
    store = backend.store
    await store.create_chat(owner="alice", chat_id="c1")
    before = await committed_turn(store, "c1", "t1", cursor="resp_1")
    stale = await store.begin_turn("c1", start("t2", lease_seconds=30))
    await store.record_transition(stale, TRANSITION, clear_provider_state=False)
    backend.clock.advance(31)
    with caplog.at_level(logging.WARNING, logger="turnstate"):
        fresh = await store.begin_turn("c1", start("t3"))
    assert any("t2" in r.getMessage() and "reclaim" in r.getMessage()
               for r in caplog.records if r.name == "turnstate")
    assert (fresh.user_seq, fresh.base_version) == (5, 1)
    messages = await store.list_messages("c1")
    assert [m.status for m in messages[2:4]] == [MessageStatus.ABORTED] * 2
    assert messages[3].parts == (TRANSITION,)
    turn = await store.load_turn("t2")
    assert (turn.status, turn.reason) == (TurnStatus.ABORTED, "lease_expired")
    chat = await store.load_chat("c1")
    assert (chat.active_turn_id, chat.version) == ("t3", 1)
    assert chat.last_provider_state == before.last_provider_state


async def test_stale_turn_cannot_commit_or_record_after_reclaim(backend: Backend) -> None:
    """Once reclaimed, the old lease commits nothing and records nothing."""
    store = backend.store
    await store.create_chat(owner="alice", chat_id="c1")
    stale = await store.begin_turn("c1", start("t1", lease_seconds=30))
    backend.clock.advance(60)
    fresh = await store.begin_turn("c1", start("t2"))
    with pytest.raises(CommitConflict):
        await store.commit_turn(stale, commit("resp_stale"))
    with pytest.raises(CommitConflict):
        await store.record_transition(stale, TRANSITION, clear_provider_state=True)
    chat = await store.commit_turn(fresh, commit("resp_fresh"))
    assert cursor_of(chat.last_provider_state) == "resp_fresh"
    assert [m.seq for m in await store.load_history("c1")] == [3, 4]


async def test_abort_after_reclaim_harms_nothing(backend: Backend) -> None:
    """A late abort of a reclaimed turn leaves the new lease and the reclaim record alone."""
    store = backend.store
    await store.create_chat(owner="alice", chat_id="c1")
    stale = await store.begin_turn("c1", start("t1", lease_seconds=30))
    backend.clock.advance(60)
    fresh = await store.begin_turn("c1", start("t2"))
    await store.abort_turn(stale, abort("cancelled", parts=(TextPart(text="late"),)))
    assert (await store.load_chat("c1")).active_turn_id == "t2"
    assert (await store.load_turn("t1")).reason == "lease_expired"
    messages = await store.list_messages("c1")
    assert messages[1].parts == () and messages[3].status == MessageStatus.IN_PROGRESS
    await store.commit_turn(fresh, commit("resp_2"))


async def test_reclaim_expired_aborts_only_expired_leases(backend: Backend) -> None:
    """``reclaim_expired`` aborts every expired turn, leaves live ones, and counts them."""
    store = backend.store
    for chat_id in ("a", "b", "c", "d"):
        await store.create_chat(owner="alice", chat_id=chat_id)
    await committed_turn(store, "a", "a1", cursor="resp_a")
    await store.begin_turn("a", start("a2", lease_seconds=10))
    await store.begin_turn("b", start("b1", lease_seconds=10))
    await store.begin_turn("c", start("c1", lease_seconds=100))
    backend.clock.advance(10)
    assert await store.reclaim_expired() == 2
    assert await store.reclaim_expired() == 0
    for chat_id, turn_id in (("a", "a2"), ("b", "b1")):
        chat = await store.load_chat(chat_id)
        assert chat.active_turn_id is None and chat.active_turn_expires_at is None
        turn = await store.load_turn(turn_id)
        assert (turn.status, turn.reason) == (TurnStatus.ABORTED, "lease_expired")
        assert turn.ended_at == backend.clock.now
    statuses = [m.status for m in await store.list_messages("a")]
    assert statuses == [MessageStatus.COMPLETED] * 2 + [MessageStatus.ABORTED] * 2
    chat_a = await store.load_chat("a")
    assert (chat_a.version, cursor_of(chat_a.last_provider_state)) == (1, "resp_a")
    assert (await store.load_chat("c")).active_turn_id == "c1"
    assert (await store.load_turn("c1")).status == TurnStatus.IN_PROGRESS
    await store.begin_turn("b", start("b2"))


async def test_abort_releases_lease_for_next_turn(backend: Backend) -> None:
    """After an abort the next begin succeeds at once, with the next seqs."""
    store = backend.store
    await store.create_chat(owner="alice", chat_id="c1")
    lease = await store.begin_turn("c1", start("t1"))
    await store.abort_turn(lease, abort("cancelled"))
    lease = await store.begin_turn("c1", start("t2"))
    assert (lease.user_seq, lease.assistant_seq, lease.base_version) == (3, 4, 0)


async def test_commit_needs_the_same_lease(backend: Backend) -> None:
    """A lease of another turn, or a stale base version, cannot commit."""
    store = backend.store
    await store.create_chat(owner="alice", chat_id="c1")
    first = await store.begin_turn("c1", start("t1"))
    await store.commit_turn(first, commit("resp_1"))
    second = await store.begin_turn("c1", start("t2"))
    with pytest.raises(CommitConflict) as caught:
        await store.commit_turn(first, commit("resp_again"))
    assert (caught.value.expected_version, caught.value.actual_version) == (0, 1)
    chat = await store.commit_turn(second, commit("resp_2"))
    assert (chat.version, cursor_of(chat.last_provider_state)) == (2, "resp_2")
