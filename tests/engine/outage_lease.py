"""A short lease for the engine tests whose store stays down (life12).

A running turn rides out a transient store error (``engine/_patience``): its reads and
its commit are tried again with backoff until its lease, as it stood at the first
failure, less a tenth. A test whose store never comes back therefore waits that long
before the turn ends: 27 s at the default 30 s lease. ``outage_lease`` runs the block
on a lease of ``OUTAGE_LEASE`` (1 s, as ``short_lease_engine``; its heartbeat every
50 ms, so a loop stalled under load still renews it in time), and times it; ``patient``
checks that the turn waited as ``_patience`` does before giving up, and not for ever.
The exact figures are checked on the virtual clock (``test_lifecycle11_outage``,
``test_life12_patience``); on the real one a pause that overshoots leaves the backoff's
last pause untaken, so only bounds hold.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager

import attrs

from tests.engine.support import Env
from turnstate.engine._lease import RETRY_FIRST
from turnstate.engine._patience import MARGIN_SHARE
from turnstate.engine._writes import ABORT_GRACE_SECONDS

OUTAGE_LEASE = ABORT_GRACE_SECONDS
OUTAGE_BEAT = 0.05


@attrs.define
class Took:
    """How long (loop time) an ``outage_lease`` block ran, once it has ended."""

    seconds: float = 0.0


@contextmanager
def outage_lease(env: Env, lease: float = OUTAGE_LEASE) -> Iterator[Took]:
    """``env``'s engine on ``lease`` (heartbeat ``OUTAGE_BEAT``) while the block runs."""
    engine, loop, took = env.engine, asyncio.get_running_loop(), Took()
    saved = engine.lease_seconds, engine.heartbeat_seconds
    engine.lease_seconds, engine.heartbeat_seconds = lease, OUTAGE_BEAT
    started = loop.time()
    try:
        yield took
    finally:
        engine.lease_seconds, engine.heartbeat_seconds = saved
        took.seconds = loop.time() - started


def patient(took: Took, lease: float = OUTAGE_LEASE, turns: int = 1) -> bool:
    """Whether ``turns`` turns whose store stayed down each waited out their patience
    and no more: at least half the budget each (a retry is given up when its pause would
    end past the budget, and the pauses double: the last one taken ends at least half
    way), and all within a lease each, with a grace for a loaded machine."""
    budget = lease * (1 - MARGIN_SHARE)
    least = (budget - RETRY_FIRST) / 2
    return turns * least <= took.seconds < turns * (lease + ABORT_GRACE_SECONDS)
