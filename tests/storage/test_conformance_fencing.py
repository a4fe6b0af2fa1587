"""Conformance, part 5 (issue 20): lease renewal and the lease epoch that fences every
turn write, on every backend."""

from __future__ import annotations

import attrs
import pytest

from tests.storage.support import TRANSITION, Backend, abort, commit, start
from turnstate.core._errors import CommitConflict, LeaseLost, TurnAlreadyRecorded
from turnstate.storage import TurnStatus, release_chat


async def test_renewal_moves_the_expiry_and_keeps_the_chat(backend: Backend) -> None:
    store = backend.store
    await store.create_chat(owner="alice", chat_id="c1")
    lease = await store.begin_turn("c1", start("t1", lease_seconds=30))
    assert lease.epoch >= 1
    backend.clock.advance(25)
    renewal = await store.renew_lease(lease, 30)
    chat = await store.load_chat("c1")
    assert chat.active_turn_id == "t1" and chat.active_turn_expires_at == renewal.expires_at
    assert renewal.expires_at > lease.expires_at
    backend.clock.advance(40)  # past the first expiry: only the renewal keeps it
    await store.commit_turn(lease, commit())
    assert (await store.load_turn("t1")).status is TurnStatus.COMPLETED


async def test_every_take_grows_the_epoch_and_a_stale_lease_is_refused(backend: Backend) -> None:
    store = backend.store
    await store.create_chat(owner="alice", chat_id="c1")
    old = await store.begin_turn("c1", start("t1", lease_seconds=30))
    backend.clock.advance(31)
    new = await store.begin_turn("c1", start("t2", lease_seconds=30))  # reclaims t1
    assert new.epoch == old.epoch + 1
    with pytest.raises(LeaseLost):
        await store.renew_lease(old, 30)
    with pytest.raises(CommitConflict):
        await store.record_transition(old, TRANSITION, clear_provider_state=False)
    with pytest.raises(CommitConflict):
        await store.commit_turn(old, commit())
    await store.abort_turn(old, abort())  # records what it can, frees nothing of t2's
    assert (await store.load_chat("c1")).active_turn_id == "t2"
    await store.renew_lease(new, 30)
    await store.commit_turn(new, commit())


async def test_a_lease_with_a_forged_epoch_is_refused(backend: Backend) -> None:
    """The epoch alone fences: the right turn with a wrong epoch writes nothing."""
    store = backend.store
    await store.create_chat(owner="alice", chat_id="c1")
    lease = await store.begin_turn("c1", start("t1"))
    forged = attrs.evolve(lease, epoch=lease.epoch + 7)
    with pytest.raises(LeaseLost):
        await store.renew_lease(forged, 30)
    with pytest.raises(CommitConflict):
        await store.commit_turn(forged, commit())
    with pytest.raises(CommitConflict):
        await store.record_transition(forged, TRANSITION, clear_provider_state=True)
    assert (await store.load_turn("t1")).status is TurnStatus.IN_PROGRESS


async def test_release_aborts_the_running_turn_as_released(backend: Backend) -> None:
    store = backend.store
    await store.create_chat(owner="alice", chat_id="c1")
    lease = await store.begin_turn("c1", start("t1", lease_seconds=3600))
    record = await release_chat(store, "c1")
    assert record is not None and record.status is TurnStatus.ABORTED
    assert record.reason == "released"
    assert (await store.load_chat("c1")).active_turn_id is None
    with pytest.raises(LeaseLost):
        await store.renew_lease(lease, 30)
    assert await release_chat(store, "c1") is None


async def test_a_reused_turn_id_is_refused_with_a_typed_error(backend: Backend) -> None:
    store = backend.store
    await store.create_chat(owner="alice", chat_id="c1")
    lease = await store.begin_turn("c1", start("t1"))
    await store.commit_turn(lease, commit())
    with pytest.raises(TurnAlreadyRecorded) as caught:
        await store.begin_turn("c1", start("t1"))
    assert caught.value.turn_id == "t1"


async def test_renewing_a_lease_of_a_deleted_chat_is_lease_lost(backend: Backend) -> None:
    """hunt-life: a chat deleted once its lease ran out is not held by the lease any
    more: the renewal says ``LeaseLost`` (as the SQL stores did), not ``ChatNotFound``,
    which the heartbeat takes for a store it cannot reach and retries for a whole lease."""
    store = backend.store
    await store.create_chat(owner="alice", chat_id="c1")
    lease = await store.begin_turn("c1", start("t1", lease_seconds=10))
    backend.clock.advance(11)
    await store.delete_chat("c1")
    with pytest.raises(LeaseLost):
        await store.renew_lease(lease, 10)
