"""The keeper's local deadline counts from a renewal's send time (hunt-life).

``LeaseKeeper`` keeps its deadline at the last successful renewal's send time plus the
lease, so it never believes in a lease the store let run out (the store's expiry is
counted from when it ran the renewal, later). The heartbeat did so; ``still_held``, the
one renewal a refused commit makes, counted from the reply instead: the keeper's
deadline ran past the store's expiry by the renewal's round trip.
"""

from __future__ import annotations

import asyncio
from typing import Any

from tests.storage.support import start
from turnstate.engine._lease import LeaseKeeper
from turnstate.storage import MemoryStore
from turnstate.storage._protocol import LeaseRenewal


class _Clock:
    """The keeper's loop, with a time the test sets (only ``time`` is read here)."""

    def __init__(self, now: float) -> None:
        self.now = now

    def time(self) -> float:
        return self.now


async def test_still_held_moves_the_deadline_from_the_renewal_s_send_time() -> None:
    store = MemoryStore()
    await store.create_chat(owner="alice", chat_id="c1")
    lease = await store.begin_turn("c1", start("t1", lease_seconds=30))
    keeper = LeaseKeeper(store, lease, lease_seconds=30, interval=10, sent_at=0.0)
    clock = _Clock(100.0)
    keeper._loop = clock  # type: ignore[assignment]
    renew = store.renew_lease

    async def slow_renewal(*args: Any) -> LeaseRenewal:
        renewal = await renew(*args)
        clock.now = 105.0  # the reply comes five seconds after the request went
        await asyncio.sleep(0)
        return renewal

    store.renew_lease = slow_renewal  # type: ignore[method-assign]
    assert await keeper.still_held()
    assert keeper.deadline == 130.0
