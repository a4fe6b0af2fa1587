"""A retried turn id whose turn died with its node (hunt-life).

A client that retries its turn id after the node running it crashed got ``ChatBusy``
from the stored record (``in_progress``) as long as nobody swept the expired lease,
while a turn with a fresh id took the chat at once (``begin_turn`` reclaims an expired
lease, but refuses a known id before it reclaims). Without ``DetachedTurns.maintain``
running (an embedder of the engine alone) the retry was busy for ever.
"""

from __future__ import annotations

import pytest

from tests.engine.support import Env, collect, make_turn
from tests.storage.support import start
from turnstate.core._errors import TurnAlreadyRecorded
from turnstate.storage import TurnStatus


async def test_a_retry_of_a_dead_turn_s_id_reclaims_it_and_says_it_was_aborted(
        env: Env) -> None:
    await env.store.begin_turn(env.chat_id, start("t-dead", lease_seconds=30))  # node dies
    env.clock.advance(seconds=31)
    with pytest.raises(TurnAlreadyRecorded, match=r"t-dead.*aborted"):
        await collect(env.engine.run_turn(env.chat_id, make_turn("a", turn_id="t-dead")))
    record = await env.store.load_turn("t-dead")
    assert record.status is TurnStatus.ABORTED and record.reason == "lease_expired"
    assert (await env.store.load_chat(env.chat_id)).active_turn_id is None
    assert (await env.turn("b")).committed

