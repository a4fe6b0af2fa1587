"""A lost lease ends the turn when it is lost, not later (helper "lifecycle").

1. A lease lost while the turn's consumer held it (between two events: awaiting its own
   write to a client) could interrupt nothing: the keeper found no driver to cancel, and
   the drive loop went back into the provider call without looking. The call then ran to
   its end (the provider's whole answer billed after the loss) or, on a stream that hung,
   for ever. The drive loop now looks when it takes the turn back (``reenter``).
2. A renewal attempt with no answer was given up only an interval after it was sent,
   even when the lease's deadline came first: after a hung attempt and a retry, the
   keeper believed in its lease for up to the retry delay past the deadline, while the
   store (which counts its expiry from when it ran the last renewal, about when it was
   sent) could already give the chat to another node. An attempt is now bounded by the
   deadline, and a keeper woken past its deadline (a process frozen longer than its
   lease) does not renew: the lease is lost.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.engine.support import make_turn
from tests.engine.virtual_time import run_virtual, virtual_store
from tests.storage.support import start
from turnstate.core._errors import LeaseLost
from turnstate.emulators._scripted import ScriptedBackend, ScriptStep
from turnstate.engine import TurnEngine, _lease, _writes
from turnstate.engine._lease import LeaseKeeper
from turnstate.storage import MemoryStore, TurnLease, TurnStatus
from turnstate.storage._protocol import LeaseRenewal

WAIT = 10.0


class TakenOver(MemoryStore):
    """A store whose renewals are refused once ``taken`` (another node has the chat)."""

    def __init__(self) -> None:
        super().__init__()
        self.taken = False
        self.refused = asyncio.Event()

    async def renew_lease(self, lease: TurnLease, lease_seconds: float) -> LeaseRenewal:
        if self.taken:
            self.refused.set()
            raise LeaseLost(lease.chat_id, lease.turn_id, lease.epoch)
        return await super().renew_lease(lease, lease_seconds)


async def test_a_lease_lost_while_the_consumer_holds_the_turn_ends_the_call() -> None:
    store = TakenOver()
    chat = await store.create_chat(owner="alice")
    backend = ScriptedBackend()
    engine = TurnEngine(store, backend.adapters(), backend, lease_seconds=0.6,
                        heartbeat_seconds=0.05)
    never = asyncio.Event()  # the provider's stream hangs after its first delta
    backend.push("openai", ScriptStep(kind="reply", text="first second third", chunks=3,
                                      gate=never, gate_after=1))
    events = engine.run_turn(chat.id, make_turn("hello", tools=()))
    seen = []
    async with asyncio.timeout(WAIT):
        async for event in events:
            seen.append(event)
            if event.type == "text_delta" and not store.taken:
                store.taken = True  # another node takes the chat ...
                await store.refused.wait()  # ... while this consumer writes the event
    final = seen[-1]
    assert final.type == "turn_aborted" and final.reason == "lease_lost", final
    assert [e.text for e in seen if e.type == "text_delta"] == ["first "]
    record = await store.load_turn(final.turn_id)
    assert (record.status, record.reason) == (TurnStatus.ABORTED, "lease_lost")


class _Losing(LeaseKeeper):
    """A keeper that notes when (on its loop's clock) it gave its lease up."""

    lost_at: float | None = None
    gone: asyncio.Event

    def _lose(self, detail: str) -> None:
        if self.lost_at is None:
            self.lost_at = self._loop.time()
            self.gone.set()
        super()._lose(detail)


def test_a_renewal_without_an_answer_is_given_up_at_the_deadline(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # A retry delay just under the interval: the hung attempt times out, the retry is
    # sent just before the deadline, and it used to be waited for a whole interval.
    # On a virtual clock (``virtual_time``): on the real one a loop stalled by a busy
    # machine moved ``late`` by the stall, and the bound had to be loose (0.45 s).
    monkeypatch.setattr(_lease, "RETRY_FIRST", 0.9)
    run_virtual(_given_up_at_the_deadline())


async def _given_up_at_the_deadline() -> None:
    interval, lease_seconds = 1.0, 3.0
    store = virtual_store()
    await store.create_chat(owner="alice", chat_id="c1")
    lease = await store.begin_turn("c1", start("t1", lease_seconds=lease_seconds))
    renew, calls = store.renew_lease, []

    async def hangs_after_the_first(*args: Any) -> LeaseRenewal:
        calls.append(1)
        if len(calls) == 1:
            return await renew(*args)
        await asyncio.Event().wait()  # a dead connection: no answer, no error
        raise AssertionError

    store.renew_lease = hangs_after_the_first  # type: ignore[method-assign]
    loop = asyncio.get_running_loop()
    keeper = _Losing(store, lease, lease_seconds=lease_seconds, interval=interval,
                     sent_at=loop.time())
    keeper.gone = asyncio.Event()
    keeper.start(None)
    try:
        await asyncio.wait_for(keeper.gone.wait(), WAIT)
    finally:
        keeper.stop()
    assert keeper.lost_at is not None and len(calls) == 3, calls
    late = keeper.lost_at - keeper.deadline  # 0.9 s (the retry's whole interval) before
    assert abs(late) < 0.01, f"the keeper held on {late:.3f} s past its deadline"
    with pytest.raises(LeaseLost):
        keeper.check()


async def test_a_keeper_woken_past_its_deadline_does_not_renew() -> None:
    store = MemoryStore()
    await store.create_chat(owner="alice", chat_id="c1")
    lease = await store.begin_turn("c1", start("t1", lease_seconds=30))
    renew, calls = store.renew_lease, []

    async def counted(*args: Any) -> LeaseRenewal:
        calls.append(1)
        return await renew(*args)

    store.renew_lease = counted  # type: ignore[method-assign]
    loop = asyncio.get_running_loop()
    # As a process frozen (SIGSTOP) for longer than its lease finds it on waking: its
    # last renewal was sent more than a lease ago. The store may have given the chat
    # away meanwhile, or not yet: either way this lease is over.
    keeper = LeaseKeeper(store, lease, lease_seconds=30, interval=10,
                         sent_at=loop.time() - 31)
    assert not await keeper._renew()
    assert calls == [] and keeper.lost == "the lease ran out before it could be renewed"


class SilentAborts(TakenOver):
    """Renewals refused once ``taken``; abort writes that hang until ``answer`` (a
    database that stopped answering: the store's own timeouts are 10 s and more)."""

    def __init__(self) -> None:
        super().__init__()
        self.answer = asyncio.Event()
        self.aborting = asyncio.Event()

    async def abort_turn(self, lease: TurnLease, abort: Any) -> None:
        self.aborting.set()
        await self.answer.wait()
        await super().abort_turn(lease, abort)


async def test_a_turn_that_lost_its_lease_ends_without_waiting_for_a_silent_store() -> None:
    store = SilentAborts()
    chat = await store.create_chat(owner="alice")
    backend = ScriptedBackend()
    engine = TurnEngine(store, backend.adapters(), backend, lease_seconds=0.6,
                        heartbeat_seconds=0.05)
    never = asyncio.Event()
    backend.push("openai", ScriptStep(kind="reply", text="first second", chunks=2,
                                      gate=never, gate_after=1))
    seen = []

    async def consume() -> None:
        async for event in engine.run_turn(chat.id, make_turn("hello", tools=())):
            seen.append(event)
            if event.type == "text_delta":
                store.taken = True  # the chat is taken; this node's abort write hangs

    consumer = asyncio.ensure_future(consume())
    done, _ = await asyncio.wait((consumer,), timeout=WAIT)
    if not done:  # the turn waits on the silent store: answer it, so the test can end
        store.answer.set()
        await consumer
        pytest.fail(f"the turn's end waited for the abort write for {WAIT:g} s")
    assert seen[-1].type == "turn_aborted" and seen[-1].reason == "lease_lost", seen[-1]
    assert store.aborting.is_set()
    left = tuple(_writes._WRITING)
    assert len(left) == 1
    store.answer.set()  # the database answers at last: the write, left going, lands
    await asyncio.wait_for(asyncio.gather(*left), WAIT)
    assert not _writes._WRITING
    record = await store.load_turn(seen[-1].turn_id)
    assert (record.status, record.reason) == (TurnStatus.ABORTED, "lease_lost")
