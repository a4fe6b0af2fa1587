"""A commit that lands after its lease expired and a newer turn came and went (helper
"lifecycle7", probe): fenced on every store. The newer turn ended without a commit, so
the chat's version is the one the stale lease carries and only the lease (turn and
epoch) can refuse it."""

from __future__ import annotations

import pytest

from tests.storage.support import Backend, abort, commit, start
from turnstate.core._errors import CommitConflict
from turnstate.storage import TurnStatus


@pytest.mark.parametrize("then", ["aborted", "running"])
async def test_a_late_commit_after_a_newer_turn_is_refused(backend: Backend, then: str) -> None:
    store = backend.store
    await store.create_chat(owner="alice", chat_id="c1")
    stale = await store.begin_turn("c1", start("t1", lease_seconds=1))
    backend.clock.advance(2)  # its lease ran out; a begin reclaims it
    newer = await store.begin_turn("c1", start("t2", lease_seconds=1))
    if then == "aborted":
        await store.abort_turn(newer, abort("cancelled"))
    assert (await store.load_chat("c1")).version == stale.base_version
    with pytest.raises(CommitConflict):
        await store.commit_turn(stale, commit("resp_late"))
    chat = await store.load_chat("c1")
    assert chat.last_provider_state is None and chat.version == stale.base_version
    assert chat.active_turn_id == (None if then == "aborted" else "t2")
    assert (await store.load_turn("t1")).status is TurnStatus.ABORTED
    newer_record = await store.load_turn("t2")
    assert newer_record.status is (TurnStatus.ABORTED if then == "aborted"
                                   else TurnStatus.IN_PROGRESS)
