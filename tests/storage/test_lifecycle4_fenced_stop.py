"""A turn whose log append is refused by the fence stops at once, on every backend
(helper "lifecycle4").

The turn-log fence (``TurnLogFenced``) refused a stale node's appends once its turn's
lease was taken from it (an operator's release, another node's reclaim), but the turn
itself ran on to its next fenced write: its provider stream went on (billed), its tools
ran, until its commit was refused or its next renewal (a third of the lease, 10 s by
default) learned the loss. The log writer now tells the turn's ``LeaseKeeper``: the
provider call in flight is cancelled, nothing more runs, the turn ends ``lease_lost``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator

from tests.engine.support import make_turn
from tests.storage.support import Backend
from turnstate.emulators._scripted import ScriptedBackend, ScriptStep
from turnstate.engine import TurnEngine
from turnstate.providers._sse import SseEvent
from turnstate.storage import TurnStatus
from turnstate.storage._release import release_chat

WAIT = 20.0  # a bound for a hang only
DELTAS = 150  # the provider's answer: one delta every PACE seconds (3 s in all)
PACE = 0.02


class Trickle(ScriptedBackend):
    """A provider that streams its answer slowly, counting what it sent and whether its
    stream was closed before its end (the request cut)."""

    def __init__(self) -> None:
        super().__init__()
        self.sent = 0
        self.cut = asyncio.Event()

    async def _events(self, step: ScriptStep, provider: str,
                      size: int) -> AsyncGenerator[SseEvent, None]:
        finished = False
        try:
            for event in self._reply_events(step, provider, size):
                await asyncio.sleep(PACE)  # the provider's pace, not a synchronisation
                self.sent += 1
                yield event
            finished = True
        finally:
            if not finished:
                self.cut.set()


async def test_a_fenced_log_write_stops_the_turn_at_once(backend: Backend) -> None:
    store = backend.store
    chat = await store.create_chat(owner="alice")
    provider = Trickle()
    provider.push("openai", ScriptStep.reply("x " * DELTAS, chunks=DELTAS))
    # A long lease: its heartbeat (every 20 s) learns nothing during the test.
    engine = TurnEngine(store, provider.adapters(), provider, lease_seconds=60)
    live = await engine.detached.start(chat.id, make_turn("hello", tools=(), turn_id="t1"))
    log, loop = engine.detached.log, asyncio.get_running_loop()
    deadline = loop.time() + WAIT
    while not any(e.type == "text_delta" for e in (await log.read(chat.id, "t1")).events):
        assert loop.time() < deadline
        await asyncio.sleep(0.01)
    released = await release_chat(store, chat.id)  # an operator frees the chat
    assert released is not None and released.reason == "released"
    sent_at_release, released_at = provider.sent, loop.time()
    await asyncio.wait_for(provider.cut.wait(), WAIT)
    after, took = provider.sent - sent_at_release, loop.time() - released_at
    print(f"\n{backend.name}: stream cut {took * 1000:.0f} ms and {after} deltas after the "
          "release")
    await asyncio.wait_for(engine.detached.settled(), WAIT)
    assert live.final is not None
    assert (live.final.type, getattr(live.final, "reason", None)) == (
        "turn_aborted", "lease_lost"), live.final
    # The stream was cut at the writer's next tick (50 ms) or so, not run to its end.
    assert after < DELTAS // 3, f"{after} more deltas streamed after the release"
    record = await store.load_turn("t1")
    assert (record.status, record.reason) == (TurnStatus.ABORTED, "released")
    assert (await store.load_chat(chat.id)).active_turn_id is None
